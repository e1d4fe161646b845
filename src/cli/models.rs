//! `sightline models list | pull ID | info ID`: the shipped manifests, downloads into the
//! Hugging Face cache, and what is cached.

use std::io::Write;

use sightline::hub::{self, Hub, ModelFiles, ModelManifest, ModelSpec, ResolvedModel};

/// Exit codes of `sightline models`.
pub mod exit_code {
    /// Done.
    pub const SUCCESS: i32 = 0;
    /// A download or resolution failed (offline with nothing cached, network error, missing
    /// file).
    pub const FAILED: i32 = 1;
    /// An unknown model id or malformed argument (clap's usage-error code).
    pub const USAGE: i32 = 2;
}

/// Arguments of `sightline models`.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelsArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: ModelsCommand,
}

/// `sightline models` subcommands.
#[derive(Debug, Clone, clap::Subcommand)]
pub enum ModelsCommand {
    /// List the supported models and whether their default files are cached.
    List,
    /// Download a model's files into the Hugging Face cache (progress on stderr).
    Pull {
        /// Manifest id (`qwen3-vl-2b`, `qwen3-vl-4b:q8_0`, `qwen3-vl-2b:safetensors`) or Hub
        /// repo id.
        id: String,
    },
    /// Show a model's repos, variants and files, and which are cached. Never downloads.
    Info {
        /// Manifest id, Hub repo id or local path.
        id: String,
    },
}

/// Runs `sightline models` on stdout and returns the exit code.
pub fn models(args: &ModelsArgs) -> i32 {
    let mut stdout = std::io::stdout();
    models_with(args, &Hub::from_env(), &mut stdout)
}

/// Runs `sightline models` with a given Hub client and output, and returns the exit code.
pub fn models_with(args: &ModelsArgs, hub: &Hub, out: &mut dyn Write) -> i32 {
    let result = match &args.command {
        ModelsCommand::List => list(hub, out),
        ModelsCommand::Pull { id } => pull(hub, id, out),
        ModelsCommand::Info { id } => info(hub, id, out),
    };
    match result {
        Ok(()) => exit_code::SUCCESS,
        Err(e) => {
            let _ = writeln!(out, "error: {e}");
            match e {
                sightline::Error::Hub { ref reason, .. } if reason.starts_with("unknown") => {
                    exit_code::USAGE
                }
                _ => exit_code::FAILED,
            }
        }
    }
}

fn cached_state(hub: &Hub, m: &ModelManifest, variant: &str) -> sightline::Result<(usize, usize)> {
    let files = m.files_for(Some(variant))?;
    let cached = files
        .iter()
        .filter(|f| hub.cached(&f.repo, "main", &f.file).is_some())
        .count();
    Ok((cached, files.len()))
}

fn list(hub: &Hub, out: &mut dyn Write) -> sightline::Result<()> {
    let _ = writeln!(
        out,
        "{:<14} {:<24} {:<28} {:>13}  cached",
        "id", "name", "variants", "visual tokens"
    );
    for m in hub::builtin_manifests()? {
        let (cached, total) = cached_state(hub, &m, &m.default_variant)?;
        let _ = writeln!(
            out,
            "{:<14} {:<24} {:<28} {:>13}  {}{}",
            m.id,
            m.name,
            m.variants().join(","),
            m.visual_token_budget,
            if cached == total {
                "yes".to_string()
            } else {
                format!("{cached}/{total} files")
            },
            if m.default {
                format!("  (default: {})", m.default_variant)
            } else {
                String::new()
            }
        );
    }
    let _ = writeln!(out, "cache: {}", hub.cache_dir().display());
    Ok(())
}

fn print_files(out: &mut dyn Write, model: &ResolvedModel) {
    let _ = writeln!(out, "{} from {}", model.spec, model.source);
    match &model.files {
        ModelFiles::Gguf {
            model,
            mmproj,
            tokenizer,
        } => {
            let _ = writeln!(out, "  model     {}", model.display());
            let _ = writeln!(out, "  mmproj    {}", mmproj.display());
            if let Some(t) = tokenizer {
                let _ = writeln!(out, "  tokenizer {}", t.display());
            }
        }
        ModelFiles::Safetensors {
            config,
            weights,
            tokenizer,
            preprocessor_config,
        } => {
            let _ = writeln!(out, "  config    {}", config.display());
            for w in weights {
                let _ = writeln!(out, "  weights   {}", w.display());
            }
            if let Some(t) = tokenizer {
                let _ = writeln!(out, "  tokenizer {}", t.display());
            }
            if let Some(p) = preprocessor_config {
                let _ = writeln!(out, "  preproc.  {}", p.display());
            }
        }
    }
    let _ = writeln!(out, "  visual token budget {}", model.visual_token_budget);
}

fn pull(hub: &Hub, id: &str, out: &mut dyn Write) -> sightline::Result<()> {
    let spec = hub::parse_model_spec(id)?;
    let model = hub.resolve(id, &spec)?;
    print_files(out, &model);
    Ok(())
}

fn info(hub: &Hub, id: &str, out: &mut dyn Write) -> sightline::Result<()> {
    match hub::parse_model_spec(id)? {
        ModelSpec::Manifest { manifest, variant } => {
            let m = *manifest;
            let _ = writeln!(out, "{} ({})", m.name, m.id);
            let _ = writeln!(out, "  gguf repo         {}", m.gguf.repo);
            let _ = writeln!(out, "  safetensors repo  {}", m.safetensors.repo);
            let _ = writeln!(out, "  default variant   {}", m.default_variant);
            let _ = writeln!(out, "  visual tokens     {}", m.visual_token_budget);
            let variants = match variant {
                Some(v) => vec![v],
                None => m.variants(),
            };
            for v in variants {
                let _ = writeln!(out, "  variant {v}:");
                for f in m.files_for(Some(&v))? {
                    let state = hub
                        .cached(&f.repo, "main", &f.file)
                        .map(|p| format!("cached at {}", p.display()))
                        .unwrap_or_else(|| "not cached".into());
                    let _ = writeln!(out, "    {} / {}  ({state})", f.repo, f.file);
                }
            }
            let _ = writeln!(out, "cache: {}", hub.cache_dir().display());
            Ok(())
        }
        ModelSpec::Local(path) => {
            let model = hub.resolve(id, &ModelSpec::Local(path))?;
            print_files(out, &model);
            Ok(())
        }
        spec => {
            // A repo: show what the cache holds, without touching the network.
            match hub.clone().with_offline(true).resolve(id, &spec) {
                Ok(model) => print_files(out, &model),
                Err(e) => {
                    let _ = writeln!(out, "{id}: not (completely) cached: {e}");
                    let _ = writeln!(out, "fetch it with `sightline models pull {id}`");
                }
            }
            let _ = writeln!(out, "cache: {}", hub.cache_dir().display());
            Ok(())
        }
    }
}
