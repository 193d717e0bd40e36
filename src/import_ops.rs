//! The options page's import and backup operations: `scripts.import` (several `.user.js` files),
//! `backup.export` and `backup.restore`. An import is one write by the user: under the write
//! lock, audited write-ahead (the pending entry rides in the import's one `set`), never
//! rate-limited or reviewed; it stores every script or none (`scripts::import`).

use crate::control::args::{loose, Arg};
use crate::env::Env;
use crate::guard::audit::{Entry, Journaled};
use crate::guard::digest::digest_hex;
use crate::provider::Provider;
use crate::scripts::backup::{self, MAX_BACKUP_BYTES};
use crate::scripts::import::{self, Answers, ImportError, Item};
use crate::scripts::record::{is_uuid, BY_USER};
use crate::scripts::store::{self, Actor, MAX_SCRIPTS};
use crate::tools::catalog::MAX_SOURCE_BYTES;
use serde::Deserialize;
use serde_json::{json, Value};

pub const IMPORT_TOOL: &str = "import_scripts";

fn err(msg: impl Into<String>) -> Value {
    json!({ "ok": false, "error": msg.into() })
}

/// The import and backup ops by wire name; fields are read loosely (`control::args`) so that
/// each op's function refuses a bad one with its own message.
#[derive(Debug, Deserialize)]
pub enum ImportOp {
    /// `files: [{name, source}]`; `replace`/`keep`: the user's answers about duplicates;
    /// `confirmed: true` once the user has confirmed what the first call (without it) showed:
    /// only then is anything fetched or written.
    #[serde(rename = "scripts.import")]
    Import {
        #[serde(default, deserialize_with = "loose")]
        files: Option<Vec<Value>>,
        #[serde(default)]
        replace: Arg<Vec<Value>>,
        #[serde(default)]
        keep: Arg<Vec<Value>>,
        #[serde(default, deserialize_with = "loose")]
        confirmed: Option<bool>,
    },
    /// `values: true` puts each script's GM values in the backup (off unless asked: values
    /// can hold what a script keeps private, tokens and the like).
    #[serde(rename = "backup.export")]
    Export {
        #[serde(default, deserialize_with = "loose")]
        values: Option<bool>,
    },
    /// As `scripts.import`, from a backup's `text`.
    #[serde(rename = "backup.restore")]
    Restore {
        #[serde(default, deserialize_with = "loose")]
        text: Option<String>,
        #[serde(default)]
        replace: Arg<Vec<Value>>,
        #[serde(default)]
        keep: Arg<Vec<Value>>,
        #[serde(default, deserialize_with = "loose")]
        confirmed: Option<bool>,
    },
}

/// Runs one of this family's ops.
pub async fn run<E: Env>(p: &Provider<E>, op: ImportOp) -> Value {
    match op {
        ImportOp::Import {
            files,
            replace,
            keep,
            confirmed,
        } => import_files(p, files, replace, keep, confirmed == Some(true)).await,
        ImportOp::Export { values } => export(p, values == Some(true)).await,
        ImportOp::Restore {
            text,
            replace,
            keep,
            confirmed,
        } => restore(p, text, replace, keep, confirmed == Some(true)).await,
    }
}

/// `scripts.import`: several `.user.js` files, all or none; shown first, imported once
/// `confirmed`.
async fn import_files<E: Env>(
    p: &Provider<E>,
    files: Option<Vec<Value>>,
    replace: Arg<Vec<Value>>,
    keep: Arg<Vec<Value>>,
    confirmed: bool,
) -> Value {
    match self::files(files).and_then(|f| answers(replace, keep).map(|a| (f, a))) {
        Ok((items, _)) if !confirmed => preview(p, items).await,
        Ok((items, answers)) => import_items(p, "import", items, &answers).await,
        Err(e) => err(e),
    }
}

/// `backup.restore`: a backup file's scripts, all or none; shown first, restored once
/// `confirmed`.
async fn restore<E: Env>(
    p: &Provider<E>,
    text: Option<String>,
    replace: Arg<Vec<Value>>,
    keep: Arg<Vec<Value>>,
    confirmed: bool,
) -> Value {
    let Some(text) = text else {
        return err("\"text\" must be the backup file's text");
    };
    match (backup::parse(&text), answers(replace, keep)) {
        (Ok(items), Ok(_)) if !confirmed => preview(p, items).await,
        (Ok(items), Ok(a)) => import_items(p, "backup restore", items, &a).await,
        (Err(e), _) => err(e.to_string()),
        (_, Err(e)) => err(e),
    }
}

/// Lines of one list (its `@match` rules, its `@connect` lines…) shown per script in the
/// confirmation; the others are counted.
const PREVIEW_LINES: usize = 20;
/// Characters of one line shown, before its invisible characters are marked.
const PREVIEW_LINE_CHARS: usize = 200;
/// Hosts named in the confirmation's line about what is fetched; the others are counted.
const PREVIEW_HOSTS: usize = 20;

/// What the user confirms, before anything is fetched or written: each script as the import
/// would store it — its name, the script it replaces, where it runs, what it asks for
/// (`@grant`, each `@connect` with what it reaches, as `scripts.list` shows them) and the files
/// it would fetch — and the hosts those files come from. A read: no lock, no audit.
async fn preview<E: Env>(p: &Provider<E>, items: Vec<Item>) -> Value {
    let snap = match p.scripts().await {
        Ok(s) => s,
        Err(e) => return err(e.to_string()),
    };
    let planned = match import::preview(&snap, items) {
        Ok(x) => x,
        Err(e) => return json!({ "ok": false, "code": code(&e), "error": e.to_string() }),
    };
    // A restore replaces a script's GM values whole, and they are in no history: the user is
    // told how many of its own it would drop (unknown if they cannot be read).
    let mut dropped = Vec::with_capacity(planned.len());
    for pl in &planned {
        dropped.push(match (&pl.values, &pl.replaces) {
            (Some(_), Some(d)) => crate::gm::store::load(&p.env, &d.uuid)
                .await
                .ok()
                .map(|v| v.keys().count()),
            _ => None,
        });
    }
    let web = crate::web::platform();
    let mut urls = crate::vec_map::VecSet::new();
    let mut hosts = crate::vec_map::VecSet::new();
    for w in planned.iter().flat_map(|p| &p.fetch) {
        if !urls.insert(w.fetch_url.clone()) {
            continue;
        }
        let host = web
            .parse_url(&w.fetch_url)
            .map(|u| u.host)
            .unwrap_or_default();
        hosts.insert(if crate::gm::connect::is_loopback(&host) {
            format!("{} (this computer)", shown_line(&host))
        } else {
            shown_line(&host)
        });
    }
    json!({
        "ok": true,
        "preview": {
            "scripts": planned.iter().zip(dropped).map(|(p, d)| planned_json(p, d)).collect::<Vec<_>>(),
            "files": urls.len(),
            "hosts": hosts.iter().take(PREVIEW_HOSTS).collect::<Vec<_>>(),
            "moreHosts": hosts.len().saturating_sub(PREVIEW_HOSTS),
        },
    })
}

/// A line of the file as the confirmation shows it: bounded, its invisible characters marked.
fn shown_line(s: &str) -> String {
    crate::guard::diff::visible(&crate::text::ellipsize(s, PREVIEW_LINE_CHARS))
}

/// One script of the confirmation (see [`preview`]); `drops`: how many GM values of the script
/// it replaces its restored ones would take the place of.
fn planned_json(p: &import::Planned, drops: Option<usize>) -> Value {
    let m = &p.metadata;
    use crate::guard::effects::{connect_is_wide, glob_is_wide, pattern_is_wide, wide_first};
    let mut hidden = 0usize;
    // A list too long to show whole keeps its wide lines (any site, `@connect *`…) first, as
    // a review does: twenty one-site `@match` lines must not hide a `@match *://*/*`.
    let mut list = |v: &[String], wide: fn(&str) -> bool| -> Value {
        hidden = hidden.saturating_add(v.len().saturating_sub(PREVIEW_LINES));
        wide_first(v, PREVIEW_LINES, wide)
            .into_iter()
            .map(|s| Value::String(crate::text::ellipsize(s, PREVIEW_LINE_CHARS)))
            .collect()
    };
    let any = |_: &str| false;
    let mut out = json!({
        "label": p.label,
        "name": m.name,
        "namespace": m.namespace,
        "version": m.version.as_deref().map(|v| crate::text::ellipsize(v, PREVIEW_LINE_CHARS)),
        "enabled": p.enabled,
        "values": p.values,
        "dropsValues": drops,
        "replaces": p.replaces.as_ref().map(|d| json!({
            "uuid": d.uuid, "name": d.name, "namespace": d.namespace, "enabled": p.replaces_enabled,
        })),
        "matches": list(&m.matches, pattern_is_wide),
        "excludeMatches": list(&m.exclude_matches, pattern_is_wide),
        "includeGlobs": list(&m.include_globs, glob_is_wide),
        "excludeGlobs": list(&m.exclude_globs, glob_is_wide),
        "runAt": m.run_at,
        "noframes": m.no_frames,
        "grants": list(&m.grants, any),
        "connects": list(&m.connects, connect_is_wide),
    });
    // Already bounded: marked as `scripts.list` marks them, `@connect` lines with their reach.
    crate::control::marked::marked(&mut out);
    if let Some(o) = out.as_object_mut() {
        let fetch: Vec<Value> = p
            .fetch
            .iter()
            .map(|w| {
                Value::String(match &w.name {
                    None => format!("@require {}", shown_line(&w.url)),
                    Some(n) => format!("@resource {} {}", shown_line(n), shown_line(&w.url)),
                })
            })
            .collect();
        o.insert("fetch".into(), fetch.into());
        o.insert("hidden".into(), hidden.into());
        // The editor's and validate_script's warnings: quoting the file's text, marked too.
        let warnings: Vec<Value> = p
            .warnings
            .iter()
            .take(PREVIEW_LINES)
            .map(|d| {
                let said = crate::text::ellipsize(&d.message, 4 * PREVIEW_LINE_CHARS);
                Value::String(format!(
                    "line {}: {}",
                    d.line,
                    crate::guard::diff::visible(&said)
                ))
            })
            .collect();
        o.insert("warnings".into(), warnings.into());
        o.insert(
            "moreWarnings".into(),
            p.warnings.len().saturating_sub(PREVIEW_LINES).into(),
        );
    }
    out
}

/// `files: [{name, source}]`, bounded before anything is copied.
fn files(files: Option<Vec<Value>>) -> Result<Vec<Item>, String> {
    let Some(list) = files else {
        return Err("\"files\" must list {name, source}".into());
    };
    if list.len() > MAX_SCRIPTS {
        return Err(format!(
            "{} files, more than the {MAX_SCRIPTS} scripts this provider keeps; nothing was imported",
            list.len()
        ));
    }
    let mut total = 0usize;
    list.iter()
        .enumerate()
        .map(|(i, f)| {
            let label = f
                .get("name")
                .and_then(Value::as_str)
                .map_or_else(|| format!("file {}", i + 1), import::label);
            let Some(source) = f.get("source").and_then(Value::as_str) else {
                return Err(format!("{label}: no source; nothing was imported"));
            };
            if source.len() > MAX_SOURCE_BYTES {
                return Err(format!(
                    "{label}: {} bytes, over the {MAX_SOURCE_BYTES}-byte limit; nothing was imported",
                    source.len()
                ));
            }
            total = total.saturating_add(source.len());
            if total > MAX_BACKUP_BYTES {
                return Err(format!(
                    "the files hold more than {MAX_BACKUP_BYTES} bytes; nothing was imported"
                ));
            }
            Ok(Item {
                label,
                source: source.to_owned(),
                enabled: None,
                values: None,
            })
        })
        .collect()
}

fn uuids(list: Arg<Vec<Value>>, key: &str) -> Result<Vec<String>, String> {
    match list {
        Arg::Absent => Ok(Vec::new()),
        Arg::Is(a) if a.len() <= MAX_SCRIPTS => a
            .iter()
            .map(|u| match u.as_str() {
                Some(u) if is_uuid(u) => Ok(u.to_owned()),
                _ => Err(format!("\"{key}\" must list script uuids")),
            })
            .collect(),
        _ => Err(format!("\"{key}\" must list script uuids")),
    }
}

fn answers(replace: Arg<Vec<Value>>, keep: Arg<Vec<Value>>) -> Result<Answers, String> {
    Ok(Answers {
        replace: uuids(replace, "replace")?,
        keep: uuids(keep, "keep")?,
    })
}

/// One import by the user; `via` is its provenance ("import", "backup restore").
async fn import_items<E: Env>(
    p: &Provider<E>,
    via: &'static str,
    items: Vec<Item>,
    answers: &Answers,
) -> Value {
    let _guard = p.write_lock().await;
    let entry = Entry {
        at: p.env.now_ms(),
        tool: IMPORT_TOOL.to_owned(),
        caller: BY_USER.to_owned(),
        result: String::new(),
        target: None,
        // The digest of what was imported, not of the whole message (which may be megabytes
        // of JSON hashed twice otherwise).
        digest: digest_hex(&json!({
            "sources": items.iter().map(|i| crate::guard::digest::sha256_hex(i.source.as_bytes())).collect::<Vec<_>>(),
            "replace": answers.replace, "keep": answers.keep,
        })),
        unchanged: false,
        from_trash: false,
        revision: None,
        purged: None,
        name: None,
        count: None,
    };
    if let Err(e) = p.settle_interrupted_write().await {
        return err(crate::guard::audit::unsettled_message(&e));
    }
    // Expired trash still holds bytes the quota counts: it goes first. A purge rewrites the GM
    // values budget, so no value change may land between its read and its write.
    {
        let _values = p.gm_values.hold().await;
        if let Err(e) = crate::by_hand::trash::sweep(p).await {
            return err(e.to_string());
        }
    }
    let snap = match p.scripts().await {
        Ok(s) => s,
        Err(e) => return err(e.to_string()),
    };
    let actor = Actor {
        by: BY_USER,
        via: Some(via),
    };
    p.registry_write_begins().await;
    let env = Journaled::new(&p.env, Some(entry.clone()));
    // The fetches run without the GM values lock: a running script's GM_setValue waits for no
    // import's files. The lock is held from the commit's read of the values budget to its one
    // `set` (always after the write lock, so the order of the two is always the same).
    let done = match import::prepare(&env, &snap, actor, items, answers).await {
        Ok(ready) => {
            let _values = p.gm_values.hold().await;
            let done = import::commit(&env, ready).await;
            // A restore may have replaced a script's values: its pages' listeners read them
            // whole (told under the same lock, so no read between gets the old cursor).
            if let Ok(d) = &done {
                let uuids: Vec<&str> = d.changes.iter().map(|c| c.record.uuid.as_str()).collect();
                p.values_replaced(&uuids);
            }
            done
        }
        Err(e) => Err(e),
    };
    drop(snap); // so the cache takes the changes in place, not in a copy
    if let Ok(done) = &done {
        for c in &done.changes {
            p.scripts_written(c);
        }
        let items = done.changes.iter().map(|c| {
            let desired = crate::scripts::sync::desired_for(&c.record, &c.source);
            (c.record.uuid.clone(), desired)
        });
        p.sync_registrations(items.collect()).await;
    }
    p.registry_write_ends();
    // A refusal wrote nothing, so nothing is pending: only a write that ran is finalized.
    let wrote = matches!(&done, Ok(d) if !d.changes.is_empty());
    let result = match &done {
        Ok(_) => "ok",
        Err(e) => code(e),
    };
    // An import that ran says how many scripts it changed — a new version, or its values
    // restored; none is "(no change)", as a write that changed nothing —, and one that wrote one
    // script names it, by the name it left, as a write's entry does.
    let changed = done.as_ref().ok().map(|d| {
        d.changes
            .iter()
            .zip(&d.values)
            .filter(|(c, values)| !c.unchanged || values.is_some())
            .count()
    });
    let one = match &done {
        Ok(d) => match d.changes.as_slice() {
            [one] => Some(&one.record),
            _ => None,
        },
        Err(_) => None,
    };
    let finished = Entry {
        at: p.env.now_ms(),
        result: result.to_owned(),
        target: one.map(|r| r.uuid.clone()),
        name: one.map(|r| crate::guard::audit::kept_name(&r.metadata.name)),
        count: changed.map(|n| n as u64),
        unchanged: changed == Some(0),
        ..entry
    };
    if wrote {
        p.audit_final(&finished).await;
    } else {
        p.audit(&finished).await;
    }
    reply(done, result)
}

/// The audit result and the page's error code of a refused import.
fn code(e: &ImportError) -> &'static str {
    match e {
        ImportError::Duplicates(_) => "CONFLICT",
        ImportError::Quota { .. }
        | ImportError::FilesTooLarge { .. }
        | ImportError::ValuesTotal { .. }
        | ImportError::Storage(_) => "STORAGE_ERROR",
        _ => "INVALID_ARGUMENT",
    }
}

/// What the page is told of an import that ran (`result`: its audit result).
fn reply(done: Result<import::Imported, ImportError>, result: &str) -> Value {
    match done {
        Ok(d) => json!({
            "ok": true,
            "imported": d.changes.iter().zip(&d.labels).zip(&d.values).map(|((c, label), values)| json!({
                "label": label,
                "uuid": c.record.uuid,
                "name": c.record.metadata.name,
                "revision": c.record.revision,
                "replaced": !c.created,
                "unchanged": c.unchanged,
                "enabled": c.record.enabled,
                "values": values,
            })).collect::<Vec<_>>(),
            "kept": d.kept,
        }),
        Err(ImportError::Duplicates(d)) => json!({
            "ok": false,
            "code": "DUPLICATES",
            "error": ImportError::Duplicates(d.clone()).to_string(),
            "duplicates": d.iter().map(|d| json!({
                "label": d.label, "uuid": d.uuid, "name": d.name, "namespace": d.namespace,
            })).collect::<Vec<_>>(),
        }),
        Err(e) => json!({ "ok": false, "code": result, "error": e.to_string() }),
    }
}

/// Every stored script, with its source (and its values when `with_values`), as one backup
/// document. A script whose values cannot be read makes no backup rather than one without them.
async fn export<E: Env>(p: &Provider<E>, with_values: bool) -> Value {
    let snap = match p.scripts().await {
        Ok(s) => s,
        Err(e) => return err(e.to_string()),
    };
    let mut all = Vec::with_capacity(snap.records.len());
    for r in &snap.records {
        let values = if with_values {
            match crate::gm::store::load(&p.env, &r.uuid).await {
                Ok(v) => Some(v),
                Err(e) => {
                    return err(format!(
                        "the values of {} could not be read, so no backup was made: {e}",
                        r.metadata.name
                    ))
                }
            }
        } else {
            None
        };
        match store::load_with_source(&p.env, &r.uuid).await {
            Ok((record, source)) => all.push((record, source, values)),
            Err(e) => {
                return err(format!(
                    "{} could not be read, so no backup was made: {e}",
                    r.metadata.name
                ))
            }
        }
    }
    // A script whose record cannot be read is not in the file: the page names it, rather than
    // "Exported N" reading as everything.
    let left_out: Vec<Value> = snap
        .problems
        .iter()
        .map(|pr| json!({ "uuid": pr.uuid, "message": pr.message }))
        .collect();
    json!({ "ok": true, "backup": backup::export(&all, p.env.now_ms()), "problems": left_out })
}

#[cfg(test)]
mod tests {
    use super::{PREVIEW_LINES, PREVIEW_LINE_CHARS};
    use crate::env::memory::MemoryEnv;
    use crate::env::{Area, Storage};
    use crate::gm::values::{self, Op};
    use crate::provider::Provider;
    use crate::scripts::backup;
    use futures::executor::block_on;
    use futures::FutureExt as _;
    use serde_json::{json, Map, Value};

    fn op(p: &Provider<MemoryEnv>, v: &Value) -> Value {
        block_on(crate::control::handle(p, v)).value
    }

    fn source(name: &str, lines: &[String]) -> String {
        format!(
            "// ==UserScript==\n// @name {name}\n// @namespace tests\n// @match https://example.com/*\n{}\n// ==/UserScript==\n1;\n",
            lines.join("\n")
        )
    }

    /// `.user.js` files, one a script, each naming `lines(i)`.
    fn files(n: usize, lines: impl Fn(usize) -> Vec<String>) -> Vec<Value> {
        (0..n)
            .map(|i| json!({"name": format!("s{i}.user.js"), "source": source(&format!("S{i}"), &lines(i))}))
            .collect()
    }

    fn stored(p: &Provider<MemoryEnv>) -> Map<String, Value> {
        p.env
            .dump(Area::Local)
            .into_iter()
            .filter(|(k, _)| !k.starts_with("audit"))
            .collect()
    }

    fn asked(p: &Provider<MemoryEnv>) -> Vec<String> {
        p.env
            .fetched
            .borrow()
            .iter()
            .map(|r| r.url.clone())
            .collect()
    }

    /// A backup of 50 scripts naming one library (and half of them a second file) asked for
    /// it 50 times. Each URL is asked once; every script records the same bytes.
    #[test]
    fn a_url_many_scripts_name_is_fetched_once_per_import() {
        let p = Provider::new(MemoryEnv::new());
        let lib = "https://cdn.test/lib.js";
        let css = "https://cdn.test/a.css";
        let list = files(50, |i| {
            let mut l = vec![format!("// @require {lib}")];
            if i % 2 == 0 {
                l.push(format!("// @resource css {css}#top"));
            }
            l
        });
        let r = op(
            &p,
            &json!({"op": "scripts.import", "files": list, "confirmed": true}),
        );
        assert_eq!(r["ok"], json!(true), "{r}");
        assert_eq!(r["imported"].as_array().map(Vec::len), Some(50));
        assert_eq!(asked(&p), [lib, css]);
        let all = stored(&p);
        let blobs: Vec<&String> = all.keys().filter(|k| k.starts_with("asset/")).collect();
        assert_eq!(blobs.len(), 2, "{blobs:?}");
        // Every script names the stored bytes.
        for (k, v) in all.iter().filter(|(k, _)| k.starts_with("script/")) {
            for a in v["assets"].as_array().unwrap() {
                let key = format!("asset/{}", a["sha256"].as_str().unwrap());
                assert!(all.contains_key(&key), "{k} names {key}, not stored");
            }
        }
    }

    /// Files that each take 15 s to come (just within one file's 20 s) kept the write lock for
    /// 15 s a script: 50 scripts, 12 minutes. The import has one budget for all of them: it
    /// ends after it, naming it, with nothing stored.
    #[test]
    fn slow_files_end_the_import_after_one_budget_not_one_a_script() {
        let p = Provider::new(MemoryEnv::new());
        p.env.fetch_ms.set(15_000.0);
        let before = stored(&p);
        let started = p.env.now.get();
        let list = files(50, |i| vec![format!("// @require https://cdn.test/{i}.js")]);
        let r = op(
            &p,
            &json!({"op": "scripts.import", "files": list, "confirmed": true}),
        );
        assert_eq!(r["ok"], json!(false), "{r}");
        let e = r["error"].as_str().unwrap();
        assert!(
            e.contains("the import's 30 s for fetching files ran out")
                && e.contains("nothing was imported"),
            "{e}"
        );
        assert_eq!(asked(&p).len(), 2, "{:?}", asked(&p));
        assert!(p.env.now.get() - started <= 30_000.0);
        assert_eq!(stored(&p), before);
    }

    /// While an import waits for a file, a running script's GM_setValue (the values store's
    /// change) goes through: the import holds the GM values lock only for its commit.
    #[test]
    fn a_value_change_is_not_held_up_by_an_imports_fetches() {
        let p = Provider::new(MemoryEnv::new());
        let r = op(
            &p,
            &json!({"op": "scripts.save", "source": source("Running", &[])}),
        );
        let uuid = r["result"]["script"]["uuid"].as_str().unwrap().to_owned();
        let slow = "https://cdn.test/slow.js";
        p.env.http_hold.borrow_mut().insert(slow.to_owned());
        let before = stored(&p);
        let msg = json!({"op": "scripts.import", "confirmed": true,
            "files": [{"name": "n.user.js", "source": source("New", &[format!("// @require {slow}")])}]});
        let mut import = Box::pin(crate::control::handle(&p, &msg));
        assert!((&mut import).now_or_never().is_none());
        assert_eq!(asked(&p), [slow], "the import waits for its file");
        let set = Op::Set(vec![("k".to_owned(), "1".to_owned())]);
        let changed = p.gm_values.apply(&p.env, &uuid, &set).now_or_never();
        assert!(
            matches!(changed, Some(Ok(_))),
            "GM_setValue waited for the import's fetch"
        );
        drop(import);
        assert_eq!(p.env.fetch_dropped.get(), 1);
        // Nothing of the import; the value stored.
        let mut want = before;
        want.insert(values::storage_key(&uuid), json!({"k": "1"}));
        want.insert(values::BUDGET_KEY.to_owned(), json!({ uuid.clone(): 2 }));
        assert_eq!(stored(&p), want);
    }

    /// Why the import still takes the GM values lock for its commit: a restore writes the
    /// values budget, and a value change that read the budget before the restore wrote it put
    /// the old count back. A change starts after each number of steps of the restore (its
    /// fetch included), so every interleaving runs; the budget always counts both.
    #[test]
    fn a_restore_and_a_value_change_at_once_keep_the_budget_exact() {
        for lead in 0..60 {
            let p = Provider::new(MemoryEnv::new());
            let save = |name: &str| {
                let r = op(
                    &p,
                    &json!({"op": "scripts.save", "source": source(name, &[])}),
                );
                r["result"]["script"]["uuid"].as_str().unwrap().to_owned()
            };
            let (restored, stays) = (save("Restored"), save("Stays"));
            let set = |v: &str| Op::Set(vec![("k".to_owned(), v.to_owned())]);
            block_on(p.gm_values.apply(&p.env, &restored, &set("1"))).unwrap();
            block_on(p.gm_values.apply(&p.env, &stays, &set("1"))).unwrap();
            let (heard_restored, heard_stays) =
                (p.gm_values.cursor(&restored), p.gm_values.cursor(&stays));
            let text = json!({"format": backup::FORMAT, "version": 2, "scripts": [{
                "name": "Restored",
                "source": source("Restored", &["// @require https://cdn.test/r.js".to_owned()]),
                "values": {"a": "\"abc\"", "b": "2"},
            }]})
            .to_string();
            // Every read and fetch yields once, so the two interleave as Chrome lets them.
            p.env.get_yields.set(1);
            p.env.fetch_yields.set(1);
            let msg = json!({"op": "backup.restore", "text": text, "replace": [restored.clone()], "confirmed": true});
            let change = set("22");
            let later = async {
                for _ in 0..lead {
                    crate::env::memory::yield_now().await;
                }
                p.gm_values.apply(&p.env, &stays, &change).await
            };
            let (done, changed) =
                block_on(async { futures::join!(crate::control::handle(&p, &msg), later) });
            assert_eq!(done.value["ok"], json!(true), "{}", done.value);
            changed.unwrap();
            p.env.get_yields.set(0);
            let got = block_on(p.env.get(Area::Local, &[values::BUDGET_KEY])).unwrap();
            let budget = &got[values::BUDGET_KEY];
            assert_eq!(
                (&budget[&restored], &budget[&stays]),
                (&json!(8), &json!(3)),
                "after {lead} steps: {budget}"
            );
            // A listener of the restored script reads its values whole; one of the other
            // hears its change.
            use crate::gm::change_log::{Page, Since};
            let page = Page {
                tab: Some(1),
                frame: Some(0),
                document: None,
            };
            assert!(matches!(
                p.gm_values.since(&restored, Some(heard_restored), &page),
                Since::Resync(_)
            ));
            assert!(matches!(
                p.gm_values.since(&stays, Some(heard_stays), &page),
                Since::Changes(c, _) if c.len() == 1 && c[0][0] == "k" && c[0][1] == "1" && c[0][2] == "22"
            ));
        }
    }

    /// A restore replaces a script's GM values whole, and values are in no history: the
    /// confirmation says how many of the script's own it would drop. None for a new script, or
    /// an item without values.
    #[test]
    fn the_confirmation_counts_the_values_a_restore_would_drop() {
        let p = Provider::new(MemoryEnv::new());
        let r = op(
            &p,
            &json!({"op": "scripts.save", "source": source("Kept", &[])}),
        );
        let uuid = r["result"]["script"]["uuid"].as_str().unwrap().to_owned();
        let set = Op::Set(vec![
            ("a".to_owned(), "1".to_owned()),
            ("b".to_owned(), "2".to_owned()),
            ("c".to_owned(), "3".to_owned()),
        ]);
        block_on(p.gm_values.apply(&p.env, &uuid, &set)).unwrap();
        let text = json!({"format": backup::FORMAT, "version": 2, "scripts": [
            {"name": "Kept", "source": source("Kept", &[]), "values": {"a": "9"}},
            {"name": "New", "source": source("New", &[]), "values": {"x": "1"}},
            {"name": "Plain", "source": source("Plain", &[])},
        ]})
        .to_string();
        let r = op(&p, &json!({"op": "backup.restore", "text": text}));
        let shown = &r["preview"]["scripts"];
        assert_eq!(shown[0]["replaces"]["uuid"], json!(uuid), "{r}");
        assert_eq!(
            (&shown[0]["values"], &shown[0]["dropsValues"]),
            (&json!(1), &json!(3))
        );
        assert_eq!(shown[1]["dropsValues"], Value::Null);
        assert_eq!(shown[2]["dropsValues"], Value::Null);
    }

    /// The first call (without `confirmed`) fetches and writes nothing: it shows each script as
    /// the import would store it — what it replaces, where it runs, each `@connect` with what it
    /// reaches, the files it would fetch and their hosts — and the backup's own text (its entry
    /// names) marked and bounded. Only the confirmed call fetches.
    #[test]
    fn the_first_call_shows_what_would_be_imported_and_fetches_nothing() {
        let p = Provider::new(MemoryEnv::new());
        let lib = "https://cdn.test/lib.js";
        let r = op(
            &p,
            &json!({"op": "scripts.save", "source": source("Dup", &[format!("// @require {lib}")])}),
        );
        let dup = r["result"]["script"]["uuid"].as_str().unwrap().to_owned();
        p.env.fetched.borrow_mut().clear();
        let local = "http://127.0.0.1:9/x.js";
        let css = "https://cdn.test/a.css";
        let evil = format!("\u{202E}sj.resu\u{200B}{}", "x".repeat(500));
        let text = json!({"format": backup::FORMAT, "version": 2, "scripts": [
            {"name": evil, "source": source("Reach", &[
                "// @match https://bank.example/*".to_owned(),
                "// @grant GM_xmlhttpRequest".to_owned(),
                "// @connect 2130706433".to_owned(),
                format!("// @require {local}"),
                format!("// @resource css {css}"),
                "// @run-at document-start".to_owned(),
                "// @noframes".to_owned(),
            ])},
            {"name": "Dup", "source": source("Dup", &[format!("// @require {lib}")]), "values": {"k": "1"}},
            {"name": "Other", "source": source("Other", &[format!("// @require {local}")]), "enabled": false},
        ]})
        .to_string();
        let before = p.env.dump(Area::Local);
        let r = op(&p, &json!({"op": "backup.restore", "text": text}));
        assert_eq!(r["ok"], json!(true), "{r}");
        assert_eq!(asked(&p), Vec::<String>::new(), "nothing is fetched");
        assert_eq!(
            p.env.dump(Area::Local),
            before,
            "nothing is written, not even the audit"
        );
        let shown = &r["preview"];
        let first = &shown["scripts"][0];
        let label = first["label"].as_str().unwrap();
        assert!(
            label.starts_with("\u{27E8}U+202E\u{27E9}sj.resu\u{27E8}U+200B\u{27E9}x")
                && label.ends_with('…')
                && label.chars().count() < 100
                && !label.contains('\u{202E}'),
            "{label}"
        );
        assert_eq!(first["name"], json!("Reach"));
        assert_eq!(first["replaces"], Value::Null);
        assert_eq!(
            first["matches"],
            json!(["https://example.com/*", "https://bank.example/*"])
        );
        assert_eq!(first["grants"], json!(["GM_xmlhttpRequest"]));
        // When it runs and in which frames, as Chrome would be given them.
        assert_eq!(
            (&first["runAt"], &first["noframes"]),
            (&json!("document_start"), &json!(true))
        );
        assert_eq!(
            (
                &shown["scripts"][1]["runAt"],
                &shown["scripts"][1]["noframes"]
            ),
            (&json!("document_idle"), &json!(false))
        );
        assert_eq!(
            first["connects"],
            json!(["2130706433 (this computer: 127.0.0.1)"])
        );
        assert_eq!(
            first["fetch"],
            json!([format!("@require {local}"), format!("@resource css {css}")])
        );
        // The stored script it replaces (if the user says so), whose file is reused.
        let second = &shown["scripts"][1];
        assert_eq!(second["replaces"]["uuid"], json!(dup));
        assert_eq!(second["fetch"], json!([]));
        assert_eq!(second["values"], json!(1));
        assert_eq!(shown["scripts"][2]["enabled"], json!(false));
        assert_eq!(shown["files"], json!(2));
        assert_eq!(
            shown["hosts"],
            json!(["127.0.0.1 (this computer)", "cdn.test"])
        );
        // A file's name too.
        let r = op(
            &p,
            &json!({"op": "scripts.import", "files": [{"name": "a\u{202E}sj.user.js", "source": source("F", &[])}]}),
        );
        assert_eq!(
            r["preview"]["scripts"][0]["label"],
            json!("a\u{27E8}U+202E\u{27E9}sj.user.js")
        );
        assert_eq!(p.env.dump(Area::Local), before);
        // Confirmed: fetched once each, stored.
        let r = op(
            &p,
            &json!({"op": "backup.restore", "text": text, "replace": [dup], "confirmed": true}),
        );
        assert_eq!(r["ok"], json!(true), "{r}");
        assert_eq!(asked(&p), [local, css]);
        assert_eq!(r["imported"].as_array().map(Vec::len), Some(3));
    }

    /// A file of many rules or long lines makes a confirmation of bounded size: 20 lines a
    /// list, 200 characters a line, the rest counted.
    #[test]
    fn the_confirmation_is_bounded() {
        let p = Provider::new(MemoryEnv::new());
        let mut lines: Vec<String> = (0..30)
            .map(|i| format!("// @match https://s{i}.example/*"))
            .collect();
        // What widens the script most is shown, however many one-site rules come first.
        lines.push("// @match *://*/*".into());
        lines.push(format!("// @connect {}.example", "a".repeat(300)));
        let r = op(
            &p,
            &json!({"op": "scripts.import", "files": [{"name": "m.user.js", "source": source("M", &lines)}]}),
        );
        let s = &r["preview"]["scripts"][0];
        assert_eq!(s["matches"].as_array().map(Vec::len), Some(PREVIEW_LINES));
        assert_eq!(s["matches"][PREVIEW_LINES - 1], json!("*://*/*"));
        assert_eq!(s["hidden"], json!(32 - PREVIEW_LINES));
        let c = s["connects"][0].as_str().unwrap();
        assert!(
            c.chars().count() <= PREVIEW_LINE_CHARS + 1 && c.ends_with('…'),
            "{c}"
        );
    }
}
