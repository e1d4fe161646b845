//! The `sightline` command-line tool.

fn main() -> anyhow::Result<()> {
    Ok(())
}
