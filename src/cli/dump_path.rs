//! Writing an output file the user named (`generate --dump-logits`) without replacing what
//! is not ours to replace: a symlink is never followed or replaced, a device node, FIFO,
//! socket or directory at the path is an error, and the file is written to a temporary file
//! in the same directory and renamed over a regular file (or into a free name) only once
//! complete.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

/// Checks that `path` is free or a regular file (not a symlink, device, FIFO or directory)
/// and that its directory exists. Call it before the work that produces the output.
pub fn check_output_path(path: &Path) -> Result<()> {
    match path.symlink_metadata() {
        Ok(meta) if meta.file_type().is_symlink() => bail!(
            "{}: is a symbolic link; refusing to write through or replace it",
            path.display()
        ),
        Ok(meta) if !meta.is_file() => bail!(
            "{}: is not a regular file (a directory, device, FIFO or socket); refusing to replace it",
            path.display()
        ),
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let dir = parent_dir(path);
            if !dir.is_dir() {
                bail!("{}: the directory {} does not exist", path.display(), dir.display());
            }
            Ok(())
        }
        Err(e) => Err(e).with_context(|| format!("{}", path.display())),
    }
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes `path` through `write` (given a temporary path in the same directory, created empty
/// and exclusively by us), then renames the result over `path` after checking it again.
pub fn write_replacing_regular(
    path: &Path,
    write: impl FnOnce(&Path) -> sightline::Result<()>,
) -> Result<()> {
    check_output_path(path)?;
    let name = path
        .file_name()
        .with_context(|| format!("{}: names no file", path.display()))?;
    let tmp = parent_dir(path).join(format!(
        ".{}.tmp-{}",
        name.to_string_lossy(),
        std::process::id()
    ));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .with_context(|| format!("{}: cannot create the temporary file", tmp.display()))?;
    let result = write(&tmp)
        .map_err(anyhow::Error::from)
        .and_then(|()| check_output_path(path))
        .and_then(|()| std::fs::rename(&tmp, path).with_context(|| format!("{}", path.display())));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}
