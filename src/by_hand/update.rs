//! Script updates by hand, asked for by the user on the options page, never in the background:
//! `scripts.checkUpdate` fetches the script's check URL, reads its header and compares versions
//! (`scripts::update`); a newer version is fetched whole and shown — old → new version, the diff,
//! and what changes in where it runs and what it may use and reach, as a review shows them —
//! before anything is stored, with the code of each new `@require`/`@resource` file, fetched as
//! the write would fetch it. `scripts.update` fetches them again and stores the update only if
//! it is, byte for byte, what the user reviewed (the script's sha256 and each new file's `id`,
//! its bytes and how they are read): as the user's own write (`write_script`'s path:
//! validation, the revision lock, history, audit), which takes those files' bytes, audited as
//! `update_script` and recorded `via update`, keeping the script's on/off state and GM values.
//!
//! The fetches are held to the `@require` rules (`gm::assets`): `https:`, `http:` only on this
//! computer, each redirect judged before it is followed, without cookies, at most
//! [`MAX_SOURCE_BYTES`] (one byte more is "too large"), within [`update::CHECK_BUDGET_MS`].

use super::{err, revision_of, uuid_of, write_via};
use crate::env::Env;
use crate::env::{elapsed_ms, Clock, FetchError, Http, HttpRequest};
use crate::gm::asset_store::{fetch_for_review, Reviewed};
use crate::gm::assets::{self, FETCH_TIMEOUT_MS};
use crate::guard::diff::{line_diff, visible};
use crate::guard::effects::{effects, Version};
use crate::guard::review_files::{self, ReviewedFile};
use crate::provider::Provider;
use crate::scripts::metadata::Metadata;
use crate::scripts::record::ScriptRecord;
use crate::scripts::store::{self, ScriptError};
use crate::scripts::update::{self, UpdateError, UpdateUrls, Verdict, CHECK_BUDGET_MS};
use crate::text::ellipsize;
use crate::tools::catalog::MAX_SOURCE_BYTES;
use crate::tools::WriteArgs;
use serde_json::{json, Value};

/// The audit log's tool for an applied update (Undo reverts it like an edit).
pub const UPDATE_TOOL: &str = "update_script";

/// Why a check or an update gave no update to store.
enum Refusal {
    Store(ScriptError),
    Update(UpdateError),
}

impl From<UpdateError> for Refusal {
    fn from(e: UpdateError) -> Self {
        Refusal::Update(e)
    }
}

impl Refusal {
    fn reply(&self) -> Value {
        match self {
            Refusal::Store(e) => err(e.to_string()),
            Refusal::Update(e) => {
                json!({ "ok": false, "error": e.to_string(), "reason": reason(e) })
            }
        }
    }
}

/// A stable name for each refusal, for the page and the tests.
fn reason(e: &UpdateError) -> &'static str {
    match e {
        UpdateError::NoUrl => "no-url",
        UpdateError::Refused { .. } => "url-refused",
        UpdateError::Fetch { .. } => "fetch",
        UpdateError::Status { .. } => "status",
        UpdateError::TooLarge { .. } => "too-large",
        UpdateError::NotText { .. } => "not-text",
        UpdateError::Header { .. } => "header",
        UpdateError::NoVersion { .. } => "no-version",
        UpdateError::NotThisScript { .. } => "not-this-script",
        UpdateError::NoDownload { .. } => "no-download",
        UpdateError::NotNewer { .. } => "not-newer",
        UpdateError::Invalid { .. } => "invalid",
        UpdateError::Changed => "changed",
        UpdateError::FilesNotShown { .. } => "files-not-shown",
    }
}

/// What the server offers for a stored script.
struct Found {
    record: ScriptRecord,
    source: String,
    urls: UpdateUrls,
    offered: Offered,
}

enum Offered {
    /// Not newer: the server's version.
    Current { verdict: Verdict, version: String },
    /// Newer: the whole script, as it would be stored.
    Update {
        source: String,
        metadata: Box<Metadata>,
        sha256: String,
    },
}

/// Fetches `url` as text, each redirect judged before it is followed, within what is left of
/// the check's budget (started at `started`).
async fn fetch_text<E: Http + Clock>(
    env: &E,
    url: &str,
    started: f64,
    check: bool,
) -> Result<String, UpdateError> {
    let web = crate::web::platform();
    let refused = |why: String| UpdateError::Refused {
        url: url.to_owned(),
        why,
    };
    let fail = |why: String| UpdateError::Fetch {
        url: url.to_owned(),
        why,
    };
    let parsed = web
        .parse_url(url)
        .map_err(|e| refused(format!("not an absolute URL ({e})")))?;
    assets::check_scheme(&parsed.scheme, &parsed.host).map_err(refused)?;
    let left = CHECK_BUDGET_MS.saturating_sub(elapsed_ms(env.now_ms(), started));
    let deadline = FETCH_TIMEOUT_MS.min(left);
    let mut req = HttpRequest {
        method: "GET".into(),
        url: parsed.href,
        // As Violentmonkey asks a check URL: a server that can sends the header alone.
        headers: if check {
            vec![("Accept".into(), "text/x-userscript-meta,*/*".into())]
        } else {
            Vec::new()
        },
        body: None,
        timeout_ms: deadline,
        anonymous: true,
        browser_headers: Vec::new(),
    };
    let fetch_started = env.now_ms();
    let mut hops = 0;
    let resp = loop {
        req.timeout_ms = deadline.saturating_sub(elapsed_ms(env.now_ms(), fetch_started));
        if req.timeout_ms == 0 {
            return Err(fail(format!(
                "the check's {} s for fetching ran out",
                CHECK_BUDGET_MS / 1000
            )));
        }
        // One byte over the bound tells "too large" from "exactly the bound".
        let resp = match env.fetch(&req, MAX_SOURCE_BYTES.saturating_add(1)).await {
            Ok(r) => r,
            // The shell stopped reading past the bound (`chrome::env::read_body`).
            Err(FetchError::TooLarge { .. }) => {
                return Err(UpdateError::TooLarge {
                    url: url.to_owned(),
                    max: MAX_SOURCE_BYTES,
                })
            }
            Err(e) => return Err(fail(ellipsize(&e.to_string(), 200))),
        };
        match &resp.location {
            // The browser follows no redirect: each hop is judged before it is asked.
            Some(to) => {
                req.url = assets::redirect_target(web, &req.url, to, hops).map_err(refused)?;
                hops += 1;
            }
            None => break resp,
        }
    };
    if !(200..300).contains(&resp.status) {
        return Err(UpdateError::Status {
            url: url.to_owned(),
            status: resp.status,
        });
    }
    if resp.body.len() > MAX_SOURCE_BYTES {
        return Err(UpdateError::TooLarge {
            url: url.to_owned(),
            max: MAX_SOURCE_BYTES,
        });
    }
    if !resp.final_url.is_empty() && resp.final_url != req.url {
        let f = web
            .parse_url(&resp.final_url)
            .map_err(|e| refused(format!("redirected to an unreadable URL ({e})")))?;
        assets::check_scheme(&f.scheme, &f.host).map_err(refused)?;
    }
    String::from_utf8(resp.body).map_err(|_| UpdateError::NotText {
        url: url.to_owned(),
    })
}

/// What the server offers for the stored script `uuid`: its check URL's header compared with
/// the installed version, and, when newer, the whole script (the check URL's answer when it
/// held code and is the download URL too, else the download URL's), checked again whole: the
/// same script, newer, and valid.
async fn find<E: Env>(p: &Provider<E>, uuid: &str) -> Result<Found, Refusal> {
    let (record, source) = store::load_with_source(&p.env, uuid)
        .await
        .map_err(Refusal::Store)?;
    let urls = update::urls(crate::web::platform(), &record.metadata).ok_or(UpdateError::NoUrl)?;
    let started = p.env.now_ms();
    let text = fetch_text(&p.env, &urls.check, started, true).await?;
    let header = update::read_header(&urls.check, &text)?;
    let verdict = update::judge(&urls.check, &record.metadata, &header)?;
    if verdict != Verdict::Newer {
        let version = header.version.unwrap_or_default();
        return Ok(Found {
            record,
            source,
            urls,
            offered: Offered::Current { verdict, version },
        });
    }
    let Some(download) = urls.download.as_deref() else {
        return Err(UpdateError::NoDownload {
            url: urls.check.clone(),
            offered: header.version.unwrap_or_default(),
        }
        .into());
    };
    let full = if download == urls.check && update::has_code(&text) {
        text
    } else {
        drop(text);
        fetch_text(&p.env, download, started, false).await?
    };
    let metadata = match store::validate(&full, MAX_SOURCE_BYTES) {
        Ok((m, _)) => m,
        Err(e) => return Err(UpdateError::Invalid { why: e.to_string() }.into()),
    };
    match update::judge(download, &record.metadata, &metadata)? {
        Verdict::Newer => {}
        Verdict::Same | Verdict::Older => {
            return Err(UpdateError::NotNewer {
                installed: record.metadata.version.clone(),
                offered: metadata.version.clone().unwrap_or_default(),
            }
            .into())
        }
    }
    let sha256 = crate::guard::digest::sha256_hex(full.as_bytes());
    Ok(Found {
        record,
        source,
        urls,
        offered: Offered::Update {
            source: full,
            metadata: Box::new(metadata),
            sha256,
        },
    })
}

/// The new `@require`/`@resource` files of a newer version (those the stored script does not
/// hold), fetched and checked as its write would, shown whole — within a bound far past a usual
/// library's size (`review_files::UPDATE_PREVIEW_BYTES`), or refused; and their answers, for the
/// write that stores them.
async fn new_files<E: Env>(
    p: &Provider<E>,
    record: &ScriptRecord,
    metadata: &Metadata,
) -> Result<(Vec<ReviewedFile>, Reviewed), Refusal> {
    let before =
        review_files::shown_before(&record.assets, &record.metadata.grants, &metadata.grants);
    let (new, fetched) = fetch_for_review(&p.env, metadata, &record.assets, &before)
        .await
        .map_err(|e| Refusal::Store(ScriptError::from(e)))?;
    let files = review_files::shown_all_within(
        &new,
        &metadata.grants,
        review_files::UPDATE_PREVIEW_LINES,
        review_files::UPDATE_PREVIEW_BYTES,
    );
    // The page cannot ask for the rest later: what cannot be shown whole is not offered.
    if files.iter().any(|f| f.partial) {
        return Err(UpdateError::FilesNotShown {
            lines: files.iter().map(|f| f.total_lines).sum(),
            max_lines: review_files::UPDATE_PREVIEW_LINES,
            max_mib: review_files::UPDATE_PREVIEW_BYTES / (1024 * 1024),
        }
        .into());
    }
    Ok((files, fetched))
}

/// A version or URL as the page shows it: bounded, its invisible characters marked.
fn shown(s: &str, chars: usize) -> String {
    visible(&ellipsize(s, chars))
}

/// The hosts a new version's new `@require`/`@resource` files would be fetched from.
fn new_file_hosts(old: &Metadata, new: &Metadata) -> Vec<String> {
    let web = crate::web::platform();
    let mut hosts = crate::vec_map::VecSet::new();
    let requires = new.requires.iter().filter(|u| !old.requires.contains(u));
    let resources = new
        .resources
        .iter()
        .filter(|r| !old.resources.contains(r))
        .map(|(_, u)| u);
    for u in requires.chain(resources) {
        let host = web.parse_url(u).map(|u| u.host).unwrap_or_default();
        hosts.insert(if crate::gm::connect::is_loopback(&host) {
            format!("{} (this computer)", shown(&host, 200))
        } else {
            shown(&host, 200)
        });
    }
    hosts.iter().cloned().collect()
}

/// `scripts.checkUpdate`: whether the server has a newer version of the script, and if so
/// what it would change. A read: nothing is stored, locked or audited.
/// With `files` false ("Check all for updates"), a newer version's new files are not fetched:
/// the page checks again, with them, when the user opens that update's review.
pub(super) async fn check<E: Env>(
    p: &Provider<E>,
    uuid: Option<String>,
    files: Option<bool>,
) -> Value {
    let uuid = match uuid_of(uuid) {
        Ok(u) => u,
        Err(e) => return e,
    };
    let found = match find(p, &uuid).await {
        Ok(f) => f,
        Err(r) => return r.reply(),
    };
    let m = &found.record.metadata;
    let installed = m.version.as_deref().map(|v| shown(v, 80));
    let base = json!({
        "ok": true,
        "uuid": uuid,
        "name": m.name,
        "revision": found.record.revision,
        "installed": installed,
        "checkUrl": shown(&found.urls.check, 300),
        "downloadUrl": found.urls.download.as_deref().map(|u| shown(u, 300)),
    });
    let mut out = base;
    let Some(o) = out.as_object_mut() else {
        return err("internal: not an object");
    };
    match found.offered {
        Offered::Current { verdict, version } => {
            // Compared as offered and as stored, not as cut for showing (R18).
            let same = m.version.as_deref() == Some(version.as_str());
            let v = shown(&version, 80);
            let was = installed.unwrap_or_else(|| "(none)".into());
            o.insert("update".into(), false.into());
            o.insert("offered".into(), v.clone().into());
            o.insert(
                "message".into(),
                match verdict {
                    Verdict::Older => format!(
                        "No update: the server offers version {v}, older than the installed {was}."
                    ),
                    _ if same => {
                        format!("Up to date: the server's version is {v}, as installed ({was}).")
                    }
                    // R17: "v1" and "v2" compare equal (Violentmonkey's order reads numbers
                    // only after a letter-led part), which "as installed" hid.
                    _ => format!(
                        "No update: the server offers version {v}, which compares equal to the installed {was} (only the numbers of a version are compared, as Violentmonkey does), so it is not newer."
                    ),
                }
                .into(),
            );
        }
        Offered::Update {
            source,
            metadata,
            sha256,
        } => {
            let before = Version {
                metadata: m,
                enabled: found.record.enabled,
                source: &found.source,
            };
            let after = Version {
                metadata: &metadata,
                enabled: found.record.enabled,
                source: &source,
            };
            let files = match files {
                Some(false) => Value::Null,
                _ => match new_files(p, &found.record, &metadata).await {
                    Ok((files, _)) => json!(files),
                    Err(r) => return r.reply(),
                },
            };
            let v = metadata
                .version
                .as_deref()
                .map_or(String::new(), |v| shown(v, 80));
            o.insert("update".into(), true.into());
            o.insert("offered".into(), v.into());
            o.insert("sha256".into(), sha256.into());
            o.insert("size".into(), source.len().into());
            o.insert(
                "effects".into(),
                effects(Some(&before), Some(&after)).into(),
            );
            o.insert("hosts".into(), new_file_hosts(m, &metadata).into());
            o.insert("files".into(), files);
            o.insert(
                "diff".into(),
                line_diff(&found.source, &source).join("\n").into(),
            );
        }
    }
    out
}

fn sha256_of(s: Option<String>) -> Result<String, Value> {
    match s {
        Some(s) if s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) => {
            Ok(s)
        }
        _ => Err(err(
            "\"sha256\" must be the sha256 of the version the check showed",
        )),
    }
}

/// `scripts.update`: stores the version the user reviewed (`sha256`, from the check, and `files`,
/// the `id` of each new file it showed: `review_files::identity`) over the `revision` the check
/// was made against, fetched again; anything else the server sends now is refused, and nothing
/// is stored. The write takes the files fetched here, which are those shown.
pub(super) async fn apply<E: Env>(
    p: &Provider<E>,
    msg: &Value,
    uuid: Option<String>,
    revision: Option<u64>,
    sha256: Option<String>,
    files: Option<Vec<String>>,
) -> Value {
    let (uuid, revision, sha256) = match (
        uuid_of(uuid),
        revision_of(revision, "revision"),
        sha256_of(sha256),
    ) {
        (Ok(u), Ok(r), Ok(s)) => (u, r, s),
        (Err(e), ..) | (_, Err(e), _) | (.., Err(e)) => return e,
    };
    let found = match find(p, &uuid).await {
        Ok(f) => f,
        Err(r) => return r.reply(),
    };
    let (source, metadata) = match found.offered {
        Offered::Update {
            source,
            sha256: s,
            metadata,
        } if s == sha256 => (source, metadata),
        Offered::Update { .. } => return Refusal::Update(UpdateError::Changed).reply(),
        Offered::Current { version, .. } => {
            return Refusal::Update(UpdateError::NotNewer {
                installed: found.record.metadata.version.clone(),
                offered: version,
            })
            .reply()
        }
    };
    let (now, fetched) = match new_files(p, &found.record, &metadata).await {
        Ok(f) => f,
        Err(r) => return r.reply(),
    };
    // Each file as it would be registered (bytes, type, charset), as the check showed it; a list
    // the page did not send is none: an update with new files is then refused.
    let shown = files.unwrap_or_default();
    if !now.iter().map(|f| &f.id).eq(shown.iter()) {
        return Refusal::Update(UpdateError::Changed).reply();
    }
    let args = WriteArgs::Replace {
        uuid,
        revision,
        source,
        // Kept as it is: an update changes the code, not whether it runs.
        enabled: None,
    };
    write_via(
        p,
        msg,
        UPDATE_TOOL,
        args,
        "update",
        Some(std::rc::Rc::new(fetched)),
    )
    .await
}
