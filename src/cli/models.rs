//! `sightline models list [--cached] | pull ID | info ID | rm ID`: the manifests (shipped and
//! the user's), downloads into the Hugging Face cache, what is cached, and removing it.

use std::io::Write;

use sightline::hub::{self, Hub, ModelFiles, ModelManifest, ModelSpec, ResolvedModel};
use sightline::model::qwen3_vl::WeightSource;
use sightline::model::weights::{LoadOptions, ModelSource};

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
    /// List the models (the shipped manifests and the user's, from
    /// `$XDG_CONFIG_HOME/sightline/models/*.toml`) and whether their default files are cached.
    List {
        /// Instead, list every model repo in the Hugging Face cache: its size, the revisions
        /// fetched (with their commits), its files, and partial downloads.
        #[arg(long)]
        cached: bool,
    },
    /// Download a model's files into the Hugging Face cache (progress on stderr).
    Pull {
        /// Manifest id (`qwen3-vl-2b`, `qwen3-vl-4b:q8_0`, `qwen3-vl-2b:safetensors`) or Hub
        /// repo id.
        id: String,
    },
    /// Show a model's repos, variants and files, and which are cached. Never downloads.
    /// For a local path (a safetensors directory or `config.json`, a text GGUF or a directory
    /// holding a GGUF pair) or a cached repo, also what the files hold: architecture, text and
    /// vision dimensions, storage types with their tensor counts, total tensors and bytes.
    /// Reads headers only, never the weights.
    Info {
        /// Manifest id, Hub repo id or local path.
        id: String,
    },
    /// Remove a model from the Hugging Face cache: a manifest id removes its GGUF and
    /// safetensors repos, `ID:VARIANT` only that quant's text GGUF (the vision tower and
    /// tokenizer are shared by the variants), a Hub repo id (`owner/name`) that repo.
    Rm {
        /// Manifest id (optionally `:variant`) or Hub repo id.
        id: String,
        /// Only say what would be removed.
        #[arg(long)]
        dry_run: bool,
    },
}

/// Runs `sightline models` on stdout and returns the exit code; errors go to `main`.
pub fn models(args: &ModelsArgs) -> anyhow::Result<i32> {
    let mut stdout = std::io::stdout();
    dispatch(args, &Hub::from_env(), &mut stdout)?;
    Ok(sightline::exit_code::SUCCESS)
}

fn dispatch(args: &ModelsArgs, hub: &Hub, out: &mut dyn Write) -> sightline::Result<()> {
    match &args.command {
        ModelsCommand::List { cached: false } => list(hub, out),
        ModelsCommand::List { cached: true } => list_cached(hub, out),
        ModelsCommand::Rm { id, dry_run } => remove(hub, id, *dry_run, out),
        ModelsCommand::Pull { id } => pull(hub, id, out),
        ModelsCommand::Info { id } => info(hub, id, out),
    }
}

fn cached_state(hub: &Hub, m: &ModelManifest, variant: &str) -> sightline::Result<(usize, usize)> {
    let files = m.files_for(Some(variant))?;
    let cached = files
        .iter()
        .filter(|f| hub.cached(&f.repo, &f.revision, &f.file).is_some())
        .count();
    Ok((cached, files.len()))
}

fn list(hub: &Hub, out: &mut dyn Write) -> sightline::Result<()> {
    let _ = writeln!(
        out,
        "{:<22} {:<42} {:<28} {:>13}  cached",
        "id", "name", "variants", "visual tokens"
    );
    for m in hub::manifests()? {
        let (cached, total) = cached_state(hub, &m, &m.default_variant)?;
        let _ = writeln!(
            out,
            "{:<22} {:<42} {:<28} {:>13}  {}{}",
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
    if let Some(dir) = hub::user_manifest_dir() {
        let _ = writeln!(out, "user manifests: {}/*.toml", dir.display());
    }
    Ok(())
}

/// Every repo in the cache: size, revisions, files, partial downloads.
fn list_cached(hub: &Hub, out: &mut dyn Write) -> sightline::Result<()> {
    let repos = hub.scan_cache()?;
    if repos.is_empty() {
        let _ = writeln!(out, "no models cached in {}", hub.cache_dir().display());
        return Ok(());
    }
    let _ = writeln!(
        out,
        "{:<44} {:>10} {:>6}  revisions",
        "repo", "size", "files"
    );
    let mut total = 0;
    for r in &repos {
        let revisions: Vec<String> = r
            .refs
            .iter()
            .map(|(rev, commit)| format!("{rev}@{}", &commit[..commit.len().min(12)]))
            .collect();
        let partial = if r.partial_bytes > 0 {
            format!(
                "  (+{} partial, resumed by the next pull)",
                human_bytes(r.partial_bytes)
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:<44} {:>10} {:>6}  {}{partial}",
            r.repo,
            human_bytes(r.bytes),
            r.files.len(),
            if revisions.is_empty() {
                "-".to_string()
            } else {
                revisions.join(", ")
            }
        );
        for f in &r.files {
            let _ = writeln!(
                out,
                "    {:<52} {:>10}  {}",
                f.name,
                human_bytes(f.bytes),
                &f.commit[..f.commit.len().min(12)]
            );
        }
        total += r.bytes + r.partial_bytes;
    }
    let _ = writeln!(
        out,
        "{} repos, {} in {}",
        repos.len(),
        human_bytes(total),
        hub.cache_dir().display()
    );
    Ok(())
}

/// `models rm`: see [`ModelsCommand::Rm`].
fn remove(hub: &Hub, id: &str, dry_run: bool, out: &mut dyn Write) -> sightline::Result<()> {
    let id = id.trim();
    let mut removed = Vec::new();
    if id.contains('/') {
        let repo = id.split(['@', ':']).next().unwrap_or(id);
        if repo != id {
            return Err(sightline::Error::hub(
                id,
                "unknown form for rm: name the repo alone (owner/name); it is removed with \
                 every revision and file",
            ));
        }
        removed.extend(hub.remove_repo(repo, dry_run)?);
    } else {
        let (name, variant) = match id.split_once(':') {
            Some((n, v)) => (n, Some(v)),
            None => (id, None),
        };
        let m = hub::find_manifest(name)?.ok_or_else(|| {
            sightline::Error::hub(
                id,
                "unknown model; use a manifest id (`sightline models list`) or a Hub repo id \
                 (`sightline models list --cached`)",
            )
        })?;
        match variant {
            None => {
                let gguf = m.gguf.as_ref().map(|g| &g.repo);
                for repo in gguf.into_iter().chain([&m.safetensors.repo]) {
                    removed.extend(hub.remove_repo(repo, dry_run)?);
                }
            }
            Some(v) => {
                let files = m.files_for(Some(v))?;
                let is_safetensors = files.iter().all(|f| f.repo == m.safetensors.repo);
                if is_safetensors {
                    removed.extend(hub.remove_repo(&m.safetensors.repo, dry_run)?);
                } else if let Some(text) = files.first() {
                    removed.push(hub.remove_files(&text.repo, &[&text.file], dry_run)?);
                }
            }
        }
    }
    let verb = if dry_run { "would remove" } else { "removed" };
    let mut bytes = 0;
    let mut any = false;
    for r in &removed {
        for repo in &r.repos {
            let _ = writeln!(out, "{verb} {repo}");
            any = true;
        }
        for f in &r.files {
            let _ = writeln!(out, "{verb} {f}");
            any = true;
        }
        bytes += r.bytes;
    }
    if any {
        let _ = writeln!(
            out,
            "{} {}",
            if dry_run { "would free" } else { "freed" },
            human_bytes(bytes)
        );
    } else {
        let _ = writeln!(out, "{id}: nothing cached in {}", hub.cache_dir().display());
    }
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
            let gguf = m.gguf.as_ref().map_or("none", |g| g.repo.as_str());
            let _ = writeln!(out, "  gguf repo         {gguf}");
            let _ = writeln!(out, "  safetensors repo  {}", m.safetensors.repo);
            let _ = writeln!(out, "  default variant   {}", m.default_variant);
            let _ = writeln!(out, "  visual tokens     {}", m.visual_token_budget);
            let _ = writeln!(
                out,
                "  dialect           {} ({})",
                m.dialect,
                m.dialect.summary()
            );
            let _ = writeln!(out, "  template          {}", m.template);
            let variants = match variant {
                Some(v) => vec![v],
                None => m.variants(),
            };
            for v in variants {
                let _ = writeln!(out, "  variant {v}:");
                for f in m.files_for(Some(&v))? {
                    let state = hub
                        .cached(&f.repo, &f.revision, &f.file)
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
            describe(out, &model)
        }
        spec => {
            // A repo: show what the cache holds, without touching the network.
            match hub.clone().with_offline(true).resolve(id, &spec) {
                Ok(model) => {
                    print_files(out, &model);
                    describe(out, &model)?;
                }
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

/// Print what the files hold: architecture, text and vision dimensions, storage types and
/// sizes. Opens the headers only ([`WeightSource::open`] memory-maps safetensors and reads
/// GGUF metadata and tensor infos); no tensor data is read, so a multi-GB model is
/// described at once.
fn describe(out: &mut dyn Write, model: &ResolvedModel) -> sightline::Result<()> {
    let source = ModelSource::try_from(model)?;
    let ws = WeightSource::open(&LoadOptions::new(source))?;
    let info = ws.info();
    let t = &info.config.text;
    let v = &info.config.vision;
    let _ = writeln!(out, "  architecture {}", info.architecture);
    let _ = writeln!(
        out,
        "  text      layers {}, hidden {}, heads {}, kv heads {}, head_dim {}, ff {}, vocab {}, \
         tied head {}, rope theta {}, mrope_section {:?}{}",
        t.num_hidden_layers,
        t.hidden_size,
        t.num_attention_heads,
        t.num_key_value_heads,
        t.head_dim,
        t.intermediate_size,
        t.vocab_size,
        if t.tie_word_embeddings { "yes" } else { "no" },
        t.rope_theta,
        t.mrope_section,
        if t.mrope_interleaved {
            " interleaved"
        } else {
            " chunked"
        },
    );
    let _ = writeln!(
        out,
        "  vision    depth {}, hidden {}, heads {}, ff {}, patch {}, temporal patch {}, merge {}, \
         out hidden {}, deepstack layers {:?}",
        v.depth,
        v.hidden_size,
        v.num_heads,
        v.intermediate_size,
        v.patch_size,
        v.temporal_patch_size,
        v.spatial_merge_size,
        v.out_hidden_size,
        v.deepstack_visual_indexes,
    );
    // Most frequent storage type first: that is the model's quantization.
    let mut types: Vec<(&String, &usize)> = info.storage_types.iter().collect();
    types.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let types: Vec<String> = types.iter().map(|(ty, n)| format!("{ty} ×{n}")).collect();
    let _ = writeln!(out, "  types     {}", types.join(", "));
    let _ = writeln!(
        out,
        "  tensors   {}, {} bytes ({})",
        info.tensor_count,
        info.total_bytes,
        human_bytes(info.total_bytes)
    );
    Ok(())
}

/// `1.23 GiB`, `18.0 MiB`, `512 B`.
fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64 / 1024.0;
    let mut unit = 0;
    while value >= 1024.0 && unit + 1 < UNITS.len() {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.1} {}", UNITS[unit])
}
