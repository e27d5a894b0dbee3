//! Repository maps (`[context] repo_summaries = true`): the model gets the
//! repository's files, each with a one-line summary a cheap model wrote,
//! within `[context] repo_map_tokens`. Summaries are kept in the store by
//! the SHA-256 of the file's content, so only files that changed are
//! summarized again, and identical files (another worktree, another
//! checkout) share them.
//!
//! A map is per repository top and built in the background: a session's
//! shell asks for the map as it is when the session starts and before each
//! message (`current`), which starts a new build when none runs and the
//! last began a while ago; the session then takes whatever map is ready,
//! never waiting for one.

mod map;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use forge_proto::RepoMapInfo;

use crate::config::ForgeConfig;
use crate::journal::{JournalWriter, StoreOp, WriteBatch};
use crate::provider::{ChatMessage, ChatRequest, ProviderClient, ProviderSettings};
use crate::store::Store;
use map::{Excerpt, Walked};

/// A new build starts at most this often per repository.
const REBUILD_AFTER: Duration = Duration::from_secs(20);
/// The most files walked in one repository.
const MAX_FILES: usize = 20_000;
/// Files larger than this are listed, not read.
const MAX_READ: u64 = 1024 * 1024;
/// How much of a file the model is shown.
const EXCERPT_BYTES: usize = 4 * 1024;
/// A batch for one request: at most this many files, this many bytes.
const BATCH_FILES: usize = 12;
const BATCH_BYTES: usize = 24 * 1024;
/// The longest one request may take.
const ASK_TIMEOUT: Duration = Duration::from_secs(60);
/// The map's size when `[context] repo_map_tokens` is not set.
pub const DEFAULT_TOKENS: u32 = 1024;

/// What a build uses of the daemon's.
pub(crate) struct Deps {
    pub store: Store,
    pub writer: JournalWriter,
    pub providers: ProviderClient,
    pub config: Arc<ForgeConfig>,
}

/// Who asks for summaries: the model that writes them and the session
/// whose usage counts them.
pub(crate) struct Asker {
    pub settings: ProviderSettings,
    pub model: String,
    pub session_id: String,
    pub cwd: String,
}

/// One repository's map as last built, and its build.
#[derive(Default)]
struct Entry {
    text: Option<Arc<str>>,
    info: RepoMapInfo,
    building: bool,
    started: Option<Instant>,
}

/// Every repository's map; a clone shares them (a build holds one).
#[derive(Default, Clone)]
pub(crate) struct RepoMaps {
    maps: Arc<Mutex<HashMap<PathBuf, Entry>>>,
}

/// The top of the repository (or folder) `cwd` is in.
fn root_of(cwd: &Path) -> PathBuf {
    forge_tools::repo_tools::project_top(cwd)
}

impl RepoMaps {
    /// The map of the repository `cwd` is in as last built (`None` when the
    /// maps are off or none is built yet); starts a build in the background
    /// when none runs and the last began over 20 s ago. `start` is called
    /// only then.
    pub(crate) fn current(
        &self,
        config: &ForgeConfig,
        cwd: &Path,
        start: impl FnOnce() -> Option<(Deps, Asker)>,
    ) -> Option<Arc<str>> {
        if !config.context.repo_summaries.unwrap_or(false) {
            return None;
        }
        let root = root_of(cwd);
        let mut maps = self.maps.lock().unwrap_or_else(|p| p.into_inner());
        let entry = maps.entry(root.clone()).or_default();
        let due = entry.started.is_none_or(|t| t.elapsed() >= REBUILD_AFTER);
        if !entry.building && due {
            match start() {
                Some((deps, asker)) => {
                    entry.building = true;
                    entry.started = Some(Instant::now());
                    entry.info.state = "building".into();
                    tokio::spawn(build(deps, self.clone(), root, asker));
                }
                None => entry.info.error = Some("no model to write summaries with".into()),
            }
        }
        entry.text.clone()
    }

    /// What `session.context {repo: true}` reports of the map of the
    /// repository `cwd` is in.
    pub(crate) fn info(&self, config: &ForgeConfig, cwd: &Path) -> RepoMapInfo {
        let root = root_of(cwd);
        let enabled = config.context.repo_summaries.unwrap_or(false);
        let maps = self.maps.lock().unwrap_or_else(|p| p.into_inner());
        let mut info = maps.get(&root).map(|e| e.info.clone()).unwrap_or_default();
        info.enabled = enabled;
        info.root = root.display().to_string();
        info.budget_tokens = config.context.repo_map_tokens.unwrap_or(DEFAULT_TOKENS) as u64;
        if !enabled {
            info.state = "off".into();
        } else if info.state.is_empty() {
            info.state = "not_built".into();
        }
        info.text = maps.get(&root).and_then(|e| e.text.as_deref().map(str::to_string));
        info
    }

    fn update(&self, root: &Path, f: impl FnOnce(&mut Entry)) {
        let mut maps = self.maps.lock().unwrap_or_else(|p| p.into_inner());
        f(maps.entry(root.to_path_buf()).or_default());
    }
}

/// A file of the map, read.
struct Read {
    path: String,
    blob: Option<String>,
    /// The start of its text, for the model; `None`: not text, or too big.
    excerpt: Option<String>,
    /// What it is, when no model is asked (binary, large, unreadable).
    fixed: Option<String>,
}

/// Walks, selects and reads the files on a blocking thread.
fn read_files(root: &Path, budget: usize) -> (Vec<Read>, std::collections::BTreeMap<String, usize>) {
    let mut files = Vec::new();
    let walker = ignore::WalkBuilder::new(root).hidden(true).git_ignore(true).git_global(false).build();
    for entry in walker.flatten() {
        if files.len() >= MAX_FILES {
            break;
        }
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            continue;
        }
        let Ok(rel) = entry.path().strip_prefix(root) else { continue };
        let path = rel.to_string_lossy().replace('\\', "/");
        // A git session's own state files are not the project's.
        if path.starts_with(".forge/sessions/") {
            continue;
        }
        let size = entry.metadata().map(|m| m.len()).unwrap_or(0);
        files.push(Walked { path, size });
    }
    let (shown, rest) = map::select(files, budget);
    let read = shown
        .into_iter()
        .map(|f| {
            if f.size > MAX_READ {
                let fixed = Some(format!("a large file ({} MiB), not summarized", f.size / (1024 * 1024)));
                return Read { path: f.path, blob: None, excerpt: None, fixed };
            }
            match std::fs::read(root.join(&f.path)) {
                Ok(bytes) => {
                    let blob = Some(forge_tools::repo_tools::hex(&forge_tools::sha256(&bytes)));
                    let head = &bytes[..bytes.len().min(EXCERPT_BYTES)];
                    if head.contains(&0) {
                        let fixed = Some(format!("a binary file ({} KiB)", bytes.len().div_ceil(1024)));
                        return Read { path: f.path, blob: None, excerpt: None, fixed };
                    }
                    let excerpt = Some(String::from_utf8_lossy(head).into_owned());
                    Read { path: f.path, blob, excerpt, fixed: None }
                }
                Err(_) => Read { path: f.path, blob: None, excerpt: None, fixed: Some("unreadable".into()) },
            }
        })
        .collect();
    (read, rest)
}

/// One build of `root`'s map: the files read, the summaries kept looked
/// up, the map published, then the missing summaries asked for batch by
/// batch, the map published again after each.
async fn build(deps: Deps, maps: RepoMaps, root: PathBuf, asker: Asker) {
    let budget = deps.config.context.repo_map_tokens.unwrap_or(DEFAULT_TOKENS) as usize;
    let walk_root = root.clone();
    let Ok((files, rest)) = tokio::task::spawn_blocking(move || read_files(&walk_root, budget)).await else {
        return maps.update(&root, |e| e.building = false);
    };
    let blobs: Vec<String> = files.iter().filter_map(|f| f.blob.clone()).collect();
    let known = deps.store.repo_summaries(&blobs).await.unwrap_or_default();
    let mut summaries: HashMap<String, String> = HashMap::new();
    let mut missing = Vec::new();
    for f in &files {
        if let Some(s) = &f.fixed {
            summaries.insert(f.path.clone(), s.clone());
        } else if let Some(s) = f.blob.as_ref().and_then(|b| known.get(b)) {
            summaries.insert(f.path.clone(), s.clone());
        } else if let (Some(text), Some(blob)) = (&f.excerpt, &f.blob) {
            missing.push((Excerpt { path: f.path.clone(), text: text.clone() }, blob.clone()));
        }
    }
    // A git session's worktree is named by its session: the repository's
    // own top names it.
    let named = forge_git::user_top(&root).unwrap_or_else(|| root.clone());
    let root_name = named.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "/".into());
    let shown: Vec<Walked> = files.iter().map(|f| Walked { path: f.path.clone(), size: 0 }).collect();
    let publish = |summaries: &HashMap<String, String>, waiting: usize, error: Option<String>| {
        let text = map::render(&root_name, &shown, &rest, summaries, budget);
        let lines = || text.lines().filter(|l| l.starts_with("- ") && !l.starts_with("- not shown:"));
        let (listed, summarized) = (lines().count(), lines().filter(|l| l.contains(": ")).count());
        maps.update(&root, |e| {
            e.info.files = (shown.len() + rest.values().sum::<usize>()) as u64;
            e.info.shown = listed as u64;
            e.info.summarized = summarized as u64;
            e.info.waiting = waiting as u64;
            e.info.tokens = map::tokens(&text) as u64;
            e.info.model = Some(asker.model.clone());
            e.info.updated_ms = Some(crate::ids::now_ms());
            e.info.error = error;
            e.text = Some(text.into());
        });
    };
    publish(&summaries, missing.len(), None);
    let mut error = None;
    let mut left = missing.len();
    for batch in batches(missing) {
        let excerpts: Vec<Excerpt> =
            batch.iter().map(|(e, _)| Excerpt { path: e.path.clone(), text: e.text.clone() }).collect();
        match ask(&deps.providers, &asker, &excerpts).await {
            Ok((got, usage)) => {
                let now = crate::ids::now_ms();
                let mut ops: Vec<StoreOp> = batch
                    .iter()
                    .filter_map(|(e, blob)| {
                        let summary = got.get(&e.path)?.clone();
                        Some(StoreOp::PutRepoSummary {
                            blob: blob.clone(),
                            summary,
                            model: asker.model.clone(),
                            created_ms: now,
                        })
                    })
                    .collect();
                if let Some(usage) = usage {
                    ops.push(StoreOp::AddUsage {
                        session_id: asker.session_id.clone(),
                        cwd: asker.cwd.clone(),
                        kind: "repo_summaries".into(),
                        provider: asker.settings.kind.as_str().to_string(),
                        model: asker.model.clone(),
                        usage,
                        created_ms: now,
                    });
                }
                if let Err(e) = deps.writer.write(WriteBatch { ops }).await {
                    tracing::warn!(error = %e, "repository summaries not kept");
                }
                summaries.extend(got);
                left -= batch.len();
                publish(&summaries, left, None);
            }
            Err(e) => {
                tracing::warn!(root = %root.display(), error = %e, "repository summaries could not be written");
                error = Some(e);
                break;
            }
        }
    }
    publish(&summaries, left, error.clone());
    maps.update(&root, |e| {
        e.building = false;
        e.info.state = if error.is_some() { "failed" } else { "ready" }.into();
    });
}

/// The files to summarize in batches of a request each.
fn batches(missing: Vec<(Excerpt, String)>) -> Vec<Vec<(Excerpt, String)>> {
    let mut out: Vec<Vec<(Excerpt, String)>> = Vec::new();
    let mut bytes = 0;
    for item in missing {
        let size = item.0.text.len();
        match out.last_mut() {
            Some(last) if last.len() < BATCH_FILES && bytes + size <= BATCH_BYTES => {
                bytes += size;
                last.push(item);
            }
            _ => {
                bytes = size;
                out.push(vec![item]);
            }
        }
    }
    out
}

/// Asks the model for one batch's summaries.
async fn ask(
    providers: &ProviderClient,
    asker: &Asker,
    batch: &[Excerpt],
) -> Result<(HashMap<String, String>, Option<forge_proto::Usage>), String> {
    let request = ChatRequest {
        model: asker.model.clone(),
        system: Some(map::INSTRUCTIONS.to_string()),
        messages: vec![ChatMessage::user(map::prompt(batch))],
        max_output_tokens: (batch.len() as u32 * 40).max(256),
        tools: Vec::new(),
        output_schema: None,
        web_search: None,
        sampling: Default::default(),
        active_files: None,
    };
    let collect = crate::provider::collect_text(providers.stream(asker.settings.clone(), request));
    let (text, usage) = tokio::time::timeout(ASK_TIMEOUT, collect)
        .await
        .map_err(|_| format!("the model took over {} s", ASK_TIMEOUT.as_secs()))??;
    Ok((map::parse(&text, batch), usage))
}

/// The model that writes a session's summaries: `[context]
/// repo_summary_model`, else `summarizer_model`, else the provider's small
/// model when the session's model is one of the provider's own (a local
/// server's model is used itself); at its own provider when the catalog
/// knows it, else the session's.
pub(crate) fn asker_for(
    config: &ForgeConfig,
    session_id: &str,
    cwd: &str,
    provider: &str,
    model: &str,
) -> Option<Asker> {
    let own = config.context.repo_summary_model.clone().or_else(|| config.context.summarizer_model.clone());
    let own = own.filter(|m| !m.trim().is_empty());
    let kind = own
        .as_deref()
        .and_then(|m| crate::catalog::provider_of(config, m))
        .or_else(|| crate::provider::ProviderKind::parse(provider))?;
    let own = own.or_else(|| {
        let session_kind = crate::provider::ProviderKind::parse(provider)?;
        let builtin = crate::catalog::lookup(config, session_kind, model).source == crate::catalog::Source::Builtin;
        builtin.then(|| session_kind.small_model().to_string())
    });
    let mut settings = ProviderSettings::resolve(kind, config);
    // Each request is used once: caching its prompt would only cost.
    settings.options.anthropic_cache = false;
    settings.options.gemini_cache_ttl = None;
    Some(Asker {
        settings,
        model: own.unwrap_or_else(|| model.to_string()),
        session_id: session_id.to_string(),
        cwd: cwd.to_string(),
    })
}
