//! Import and backup: all or nothing, duplicates asked about, the quota bounded before the
//! write, and the backup format's round trip (export → parse → restore → the same scripts).

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::Area;
use lumo_userscripts::gm::values as gm_values;
use lumo_userscripts::guard::audit;
use lumo_userscripts::provider::Provider;
use lumo_userscripts::scripts::backup;
use serde_json::{json, Map, Value};

fn op(p: &Provider<MemoryEnv>, v: Value) -> Value {
    block_on(control::handle(p, &v)).value
}

/// An op that must succeed; its answer.
fn ok(p: &Provider<MemoryEnv>, v: Value) -> Value {
    let r = op(p, v);
    assert_eq!(r["ok"], json!(true), "{r}");
    r
}

/// A script saved by hand; its uuid.
fn saved(p: &Provider<MemoryEnv>, source: String) -> String {
    let r = ok(p, json!({"op": "scripts.save", "source": source}));
    r["result"]["script"]["uuid"].as_str().unwrap().to_owned()
}

/// An op that must be refused with an error containing `want` and write nothing at all
/// (scripts, sources, history, values): the all-or-nothing check every bad input gets.
fn refused(p: &Provider<MemoryEnv>, v: Value, want: &str) -> Value {
    let before = scripts_state(p);
    let r = op(p, v);
    assert_eq!(r["ok"], json!(false), "{r}");
    let e = r["error"].as_str().unwrap_or_default();
    assert!(e.contains(want), "{e} (wanted {want})");
    assert_eq!(
        scripts_state(p),
        before,
        "a refusal wrote something: {want}"
    );
    r
}

/// The scripts' stored content, without the audit and the registry's bookkeeping.
fn scripts_state(p: &Provider<MemoryEnv>) -> Map<String, Value> {
    p.env
        .dump(Area::Local)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("audit"))
        .collect()
}

fn listed(p: &Provider<MemoryEnv>) -> Vec<(String, bool, String)> {
    let mut out: Vec<(String, bool, String)> = op(p, json!({"op": "scripts.list"}))["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let full = op(p, json!({"op": "scripts.get", "uuid": s["uuid"]}));
            (
                s["name"].as_str().unwrap().to_owned(),
                s["enabled"].as_bool().unwrap(),
                full["script"]["source"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    out.sort();
    out
}

fn file(name: &str, source: String) -> Value {
    json!({"name": name, "source": source})
}

/// A tiny deterministic generator: the property test needs variety, not a crate.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn text(&mut self, max: u64) -> String {
        const CHARS: &[char] = &[
            'a', 'Z', ' ', '\n', '\t', '"', '\\', 'é', '😀', '\u{2028}', '/', '*', '`',
        ];
        (0..self.next() % max)
            .map(|_| CHARS[(self.next() % CHARS.len() as u64) as usize])
            .collect()
    }
}

#[test]
fn export_parse_restore_round_trips_every_script_byte_for_byte() {
    for seed in 1..=12u64 {
        let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15));
        let p = provider();
        let n = 1 + rng.next() % 9;
        for i in 0..n {
            let body = rng.text(400);
            let enabled = rng.next() % 2 == 0;
            ok(
                &p,
                json!({"op": "scripts.save", "source": script(&format!("S{seed}-{i}"), &body), "enabled": enabled}),
            );
        }
        let before = listed(&p);
        let exported = ok(&p, json!({"op": "backup.export"}));
        let text = serde_json::to_string_pretty(&exported["backup"]).unwrap();
        // export → parse: the same sources and states.
        let items = backup::parse(&text).unwrap();
        let mut parsed: Vec<(bool, String)> = items
            .iter()
            .map(|i| (i.enabled.unwrap(), i.source.clone()))
            .collect();
        parsed.sort_by(|a, b| a.1.cmp(&b.1));
        let mut want: Vec<(bool, String)> =
            before.iter().map(|(_, e, s)| (*e, s.clone())).collect();
        want.sort_by(|a, b| a.1.cmp(&b.1));
        assert_eq!(parsed, want, "seed {seed}");
        // → a wiped provider restores everything as it was.
        let fresh = provider();
        ok(
            &fresh,
            json!({"op": "backup.restore", "confirmed": true, "text": text}),
        );
        assert_eq!(listed(&fresh), before, "seed {seed}");
    }
}

#[test]
fn an_import_stores_every_file_or_none() {
    let p = provider();
    saved(&p, script("Kept", "old"));
    // One bad file among good ones: nothing is stored, and the error names it.
    refused(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": [
            file("a.user.js", script("A", "1")),
            file("bad.user.js", "// ==UserScript==\n// @match nope\n// ==/UserScript==\n".into()),
            file("b.user.js", script("B", "1")),
        ]}),
        "bad.user.js",
    );
    // Two files that are the same script.
    refused(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": [file("a.user.js", script("A", "1")), file("a2.user.js", script("A", "2"))]}),
        "a.user.js and a2.user.js",
    );
    // Two files whose names read the same (a Cyrillic е): the error says why they are one
    // script, since the user sees two names (R17).
    refused(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": [file("one.user.js", script("Twice X", "1")), file("two.user.js", script("Twic\u{435} X", "2"))]}),
        "one.user.js and two.user.js have the same @namespace and @name, or ones that read the same (look-alike letters",
    );
    // Storage failing: the one set fails whole.
    *p.env.fail_writes.borrow_mut() = Some("QUOTA_BYTES quota exceeded".into());
    refused(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": [file("a.user.js", script("A", "1"))]}),
        "nothing was imported",
    );
    *p.env.fail_writes.borrow_mut() = None;
    // The good ones: all stored, audited once as the user's.
    let r = ok(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": [file("a.user.js", script("A", "1")), file("b.user.js", script("B", "1"))]}),
    );
    assert_eq!(r["imported"].as_array().unwrap().len(), 2, "{r}");
    assert_eq!(listed(&p).len(), 3);
    let log = block_on(audit::read_all(&p.env)).unwrap();
    let ok: Vec<_> = log
        .iter()
        .filter(|e| e.tool == "import_scripts" && e.caller == "user" && e.result == "ok")
        .collect();
    // One entry for both, saying how many it wrote (naming none: it wrote two).
    assert_eq!(ok.len(), 1, "{log:?}");
    assert_eq!((ok[0].count, ok[0].unchanged), (Some(2), false), "{log:?}");
    assert_eq!((&ok[0].target, &ok[0].name), (&None, &None), "{log:?}");
    let pending = p.env.dump(Area::Local).get("audit/pending").cloned();
    assert!(
        pending.is_some_and(|v| v.get("tool").is_none()),
        "the pending entry is cleared"
    );
}

#[test]
fn a_duplicate_is_asked_about_then_replaced_with_history_or_kept() {
    let p = provider();
    let uuid = saved(&p, script("Dup", "old"));
    let files = json!([
        file("dup.user.js", script("Dup", "new")),
        file("n.user.js", script("N", "1"))
    ]);
    // Asking writes nothing.
    let r = refused(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": files}),
        "would replace existing scripts",
    );
    assert_eq!(r["code"], json!("DUPLICATES"), "{r}");
    assert_eq!(r["duplicates"][0]["uuid"], json!(uuid));
    assert_eq!(r["duplicates"][0]["label"], json!("dup.user.js"));
    // Kept: only the new one comes in.
    let r = op(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": files, "keep": [uuid]}),
    );
    assert_eq!(r["kept"], json!(["dup.user.js"]), "{r}");
    assert_eq!(listed(&p).len(), 2);
    // Replaced: a new revision, the old one in history, by the user via import.
    op(
        &p,
        json!({"op": "scripts.delete", "uuid": r["imported"][0]["uuid"]}),
    );
    let r = op(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": files, "replace": [uuid]}),
    );
    assert_eq!(r["imported"][0]["replaced"], json!(true), "{r}");
    let h = op(&p, json!({"op": "scripts.revisions", "uuid": uuid}));
    assert_eq!(h["revisions"][0]["revision"], json!(2));
    assert_eq!(h["revisions"][0]["via"], json!("import"));
    assert_eq!(h["revisions"][1]["revision"], json!(1));
    let got = op(&p, json!({"op": "scripts.get", "uuid": uuid}));
    assert!(got["script"]["source"].as_str().unwrap().contains("new"));
    // The same file again: nothing to store, no copy pushed into the history.
    p.env.advance(1000.0);
    let r = op(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": [file("dup.user.js", script("Dup", "new"))], "replace": [uuid]}),
    );
    assert_eq!(r["imported"][0]["unchanged"], json!(true), "{r}");
    assert_eq!(r["imported"][0]["revision"], json!(2));
    let h = op(&p, json!({"op": "scripts.revisions", "uuid": uuid}));
    assert_eq!(h["revisions"].as_array().unwrap().len(), 2, "{h}");
    // The log says so: an import of one script that changed nothing, named by its name.
    let last = block_on(audit::read_all(&p.env)).unwrap().remove(0);
    assert_eq!(
        (
            last.tool.as_str(),
            last.count,
            last.unchanged,
            last.name.as_deref()
        ),
        ("import_scripts", Some(0), true, Some("Dup")),
        "{last:?}"
    );
    // The same text switched off is a change of state: a revision.
    op(
        &p,
        json!({"op": "scripts.setEnabled", "uuid": uuid, "enabled": false}),
    );
    let text = serde_json::to_string(&ok(&p, json!({"op": "backup.export"}))["backup"]).unwrap();
    op(
        &p,
        json!({"op": "scripts.setEnabled", "uuid": uuid, "enabled": true}),
    );
    let all: Vec<Value> = op(&p, json!({"op": "scripts.list"}))["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["uuid"].clone())
        .collect();
    let r = op(
        &p,
        json!({"op": "backup.restore", "text": text, "confirmed": true, "replace": all}),
    );
    let dup = r["imported"]
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["uuid"] == json!(uuid))
        .unwrap()
        .clone();
    assert_eq!(
        (dup["unchanged"].clone(), dup["enabled"].clone()),
        (json!(false), json!(false)),
        "{r}"
    );
}

#[test]
fn the_quota_is_bounded_before_anything_is_written() {
    let p = provider();
    saved(&p, script("Kept", "old"));
    let big = "x".repeat(250 * 1024);
    let files: Vec<Value> = (0..45)
        .map(|i| {
            file(
                &format!("{i}.user.js"),
                script(&format!("Big {i}"), &format!("// {big}")),
            )
        })
        .collect();
    let r = refused(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": files}),
        "not enough storage",
    );
    assert!(r["error"]
        .as_str()
        .unwrap()
        .contains("nothing was imported"));
    // Refused, and audited as such.
    let log = block_on(audit::read_all(&p.env)).unwrap();
    assert!(log
        .iter()
        .any(|e| e.tool == "import_scripts" && e.result == "STORAGE_ERROR"));
    // 30 of them fit.
    let files: Vec<Value> = (0..30)
        .map(|i| {
            file(
                &format!("{i}.user.js"),
                script(&format!("Big {i}"), &format!("// {big}")),
            )
        })
        .collect();
    ok(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": files}),
    );
}

/// Each item's files are counted as they are fetched: an import whose files cannot fit stops
/// there, not after fetching every item's (a backup naming thousands would hold them all in
/// memory first).
#[test]
fn files_that_cannot_fit_stop_the_import_as_they_are_fetched() {
    let p = provider();
    let files: Vec<Value> = (0..30)
        .map(|i| {
            let url = format!("https://cdn.example/lib-{i}.js");
            p.env.http_answers.borrow_mut().insert(
                url.clone(),
                Ok(lumo_userscripts::env::HttpResponse {
                    status: 200,
                    status_text: "OK".into(),
                    final_url: url.clone(),
                    headers: vec![],
                    body: format!("/* {i} */{}", "y".repeat(900 * 1024)).into_bytes(),
                    location: None,
                }),
            );
            let source = script(&format!("Lib {i}"), "").replace(
                "// ==/UserScript==",
                &format!("// @require {url}\n// ==/UserScript=="),
            );
            file(&format!("{i}.user.js"), source)
        })
        .collect();
    let r = refused(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": files}),
        "@require and @resource files of these scripts take more than",
    );
    assert!(r["error"]
        .as_str()
        .unwrap()
        .contains("nothing was imported"));
    let fetched = p.env.fetched.borrow().len();
    assert!(
        fetched < 15,
        "stopped once over, not after all 30: {fetched} fetched"
    );
}

#[test]
fn hostile_backups_change_nothing() {
    let p = provider();
    saved(&p, script("Kept", "old"));
    for (text, want) in [
        (json!({"format": backup::FORMAT, "version": 3, "scripts": []}).to_string(), "format version 3, newer than version 2"),
        ("not json".to_owned(), "not JSON"),
        (json!({"format": backup::FORMAT, "version": 1, "scripts": [{"source": script("A", "1")}, {"source": "no metadata"}]}).to_string(), "script 2"),
    ] {
        refused(&p, json!({"op": "backup.restore", "confirmed": true, "text": text}), want);
    }
    for bad in [
        json!({"op": "scripts.import"}),
        json!({"op": "scripts.import", "confirmed": true, "files": [{"name": "x"}]}),
        json!({"op": "scripts.import", "confirmed": true, "files": [], "replace": ["nope"]}),
        json!({"op": "backup.restore"}),
    ] {
        refused(&p, bad, "");
    }
}

/// A script that reads its values (so its registered code carries them).
fn valued(name: &str, body: &str) -> String {
    format!("// ==UserScript==\n// @name {name}\n// @namespace tests\n// @match https://example.com/*\n// @grant GM_getValue\n// ==/UserScript==\n{body}\n")
}

fn set_values(p: &Provider<MemoryEnv>, uuid: &str, pairs: Vec<(String, String)>) {
    let vs = lumo_userscripts::gm::store::ValueStore::default();
    block_on(vs.apply(&p.env, uuid, &gm_values::Op::Set(pairs))).unwrap();
}

/// Each script's values by name, as stored.
fn values_by_name(p: &Provider<MemoryEnv>) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = op(p, json!({"op": "scripts.list"}))["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            let uuid = s["uuid"].as_str().unwrap();
            let v = block_on(lumo_userscripts::gm::store::load(&p.env, uuid)).unwrap();
            (s["name"].as_str().unwrap().to_owned(), v.encode())
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The code Chrome was given for the script named `name`.
fn registered_code(p: &Provider<MemoryEnv>, name: &str) -> String {
    let list = op(p, json!({"op": "scripts.list"}));
    let uuid = list["scripts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == json!(name))
        .unwrap()["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    serde_json::to_string(&p.env.registrations.borrow()[&uuid].js).unwrap()
}

#[test]
fn values_round_trip_when_asked_for_and_stay_out_otherwise() {
    for seed in 1..=8u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D));
        let p = provider();
        let n = 1 + rng.next() % 6;
        for i in 0..n {
            let name = format!("V{seed}-{i}");
            let uuid = saved(&p, valued(&name, &rng.text(200)));
            // Some scripts hold no values at all.
            let pairs: Vec<(String, String)> = (0..rng.next() % 5)
                .map(|k| {
                    let text = serde_json::to_string(&rng.text(60)).unwrap();
                    (format!("{}{k}", rng.text(8)), text)
                })
                .collect();
            if !pairs.is_empty() {
                set_values(&p, &uuid, pairs);
            }
        }
        set_values(
            &p,
            op(&p, json!({"op": "scripts.list"}))["scripts"][0]["uuid"]
                .as_str()
                .unwrap(),
            vec![("marker".into(), "\"restoredmarker42\"".into())],
        );
        let before = values_by_name(&p);
        let scripts_before = listed(&p);

        // Without values (the default): version 1, no values in it, none restored.
        let plain = op(&p, json!({"op": "backup.export"}));
        assert_eq!(plain["backup"]["version"], json!(1), "seed {seed}");
        assert!(!plain["backup"].to_string().contains("restoredmarker42"));
        let fresh = provider();
        ok(
            &fresh,
            json!({"op": "backup.restore", "confirmed": true, "text": plain["backup"].to_string()}),
        );
        assert!(values_by_name(&fresh).iter().all(|(_, v)| v == &json!({})));

        // With values: version 2, every script's values back as they were, and in the code
        // registered for it.
        let full = op(&p, json!({"op": "backup.export", "values": true}));
        assert_eq!(full["backup"]["version"], json!(2), "seed {seed}");
        let text = serde_json::to_string_pretty(&full["backup"]).unwrap();
        let fresh = provider();
        ok(
            &fresh,
            json!({"op": "backup.restore", "confirmed": true, "text": text}),
        );
        assert_eq!(listed(&fresh), scripts_before, "seed {seed}");
        assert_eq!(values_by_name(&fresh), before, "seed {seed}");
        let marked = &before
            .iter()
            .find(|(_, v)| v.get("marker").is_some())
            .unwrap()
            .0;
        assert!(
            registered_code(&fresh, marked).contains("restoredmarker42"),
            "the registered snapshot has the restored values"
        );
        let budget = &fresh.env.dump(Area::Local)["values/budget"];
        let total: u64 = budget
            .as_object()
            .unwrap()
            .values()
            .map(|b| b.as_u64().unwrap())
            .sum();
        let want: usize = before
            .iter()
            .flat_map(|(_, v)| v.as_object().unwrap().iter())
            .map(|(k, v)| k.len() + v.as_str().unwrap().len())
            .sum();
        assert_eq!(
            total as usize, want,
            "the budget counts the restored values"
        );
    }
}

#[test]
fn a_restore_over_a_script_replaces_its_values_only_when_the_backup_has_them() {
    let p = provider();
    let uuid = saved(&p, valued("Mine", "1"));
    set_values(
        &p,
        &uuid,
        vec![("k".into(), "\"old\"".into()), ("gone".into(), "1".into())],
    );
    let entry = |values: Option<Value>| {
        let mut e = json!({"name": "Mine", "source": valued("Mine", "2")});
        if let Some(v) = values {
            e["values"] = v;
        }
        json!({"format": backup::FORMAT, "version": 2, "scripts": [e]}).to_string()
    };
    let r = ok(
        &p,
        json!({"op": "backup.restore", "confirmed": true, "text": entry(None), "replace": [uuid]}),
    );
    assert_eq!(r["imported"][0]["values"], json!(null), "{r}");
    assert_eq!(
        values_by_name(&p),
        [("Mine".into(), json!({"k": "\"old\"", "gone": "1"}))]
    );
    let r = ok(
        &p,
        json!({"op": "backup.restore", "confirmed": true, "text": entry(Some(json!({"k": "\"new\""}))), "replace": [uuid]}),
    );
    assert_eq!(r["imported"][0]["values"], json!(1), "{r}");
    assert_eq!(
        values_by_name(&p),
        [("Mine".into(), json!({"k": "\"new\""}))]
    );
    assert!(registered_code(&p, "Mine").contains("new"));
}

#[test]
fn a_backup_with_values_over_a_bound_is_refused_whole() {
    let p = provider();
    let holder = saved(&p, valued("Holder", "1"));
    // The stored scripts already hold most of the total.
    let big = format!("\"{}\"", "x".repeat(gm_values::MAX_SCRIPT_BYTES - 20));
    set_values(&p, &holder, vec![("a".into(), big.clone())]);
    for i in 0..6 {
        let u = saved(&p, valued(&format!("Filler {i}"), "1"));
        set_values(&p, &u, vec![("a".into(), big.clone())]);
    }
    let backup = |scripts: Vec<Value>| {
        json!({"format": backup::FORMAT, "version": 2, "scripts": scripts}).to_string()
    };
    let fine =
        |name: &str| json!({"name": name, "source": valued(name, "1"), "values": {"k": "1"}});
    let cases = [
        // One script over its own bound, next to a good one.
        (
            backup(vec![
                fine("Good"),
                json!({"name": "Huge", "source": valued("Huge", "1"), "values": {"k": format!("\"{}\"", "x".repeat(gm_values::MAX_SCRIPT_BYTES))}}),
            ]),
            "the values of script 2 (Huge) are over a bound",
        ),
        // Within its own bounds, but with what is stored the total is over.
        (
            backup(vec![
                fine("Good"),
                json!({"name": "Big", "source": valued("Big", "1"), "values": {"a": big}}),
                json!({"name": "Big 2", "source": valued("Big 2", "1"), "values": {"a": big}}),
            ]),
            "over the 2097152 they may hold together",
        ),
        (
            backup(vec![
                json!({"name": "Bad", "source": valued("Bad", "1"), "values": {"k": "{not json"}}),
            ]),
            "not JSON text",
        ),
    ];
    for (text, want) in cases {
        let r = refused(
            &p,
            json!({"op": "backup.restore", "confirmed": true, "text": text}),
            want,
        );
        assert!(r["error"].as_str().unwrap().contains("nothing was"), "{r}");
    }
    // Replacing the holder's values with smaller ones fits: what is replaced does not count.
    ok(
        &p,
        json!({"op": "backup.restore", "confirmed": true, "replace": [holder], "text": backup(vec![json!({"name": "Holder", "source": valued("Holder", "2"), "values": {"a": "1"}})])}),
    );
}

/// A script whose stored record cannot be read is not in the backup: the answer names it (the
/// page says so), rather than a count that reads as everything.
#[test]
fn an_export_names_a_script_it_left_out() {
    let p = provider();
    saved(&p, script("A", "1"));
    let b = saved(&p, script("B", "1"));
    let mut r = p.env.dump(Area::Local)[&format!("script/{b}")].clone();
    r["revision"] = json!("two");
    put(&p, [(format!("script/{b}"), r)]);
    let fresh = restarted(&p);
    let e = ok(&fresh, json!({"op": "backup.export"}));
    assert_eq!(e["backup"]["scripts"].as_array().unwrap().len(), 1);
    assert_eq!(e["problems"][0]["uuid"], json!(b), "{e}");
    assert!(e["problems"][0]["message"]
        .as_str()
        .is_some_and(|m| !m.is_empty()));
}
