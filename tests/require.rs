//! `@require` / `@resource`: fetched when a script is written (every path that stores a new
//! source), stored with their sha256 once per content, never fetched again for an unchanged
//! URL, and a failure stores nothing.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::{Area, FetchError, HttpResponse};
use lumo_userscripts::provider::Provider;
use serde_json::{json, Map, Value};

const LIB: &str = "https://cdn.test/lib.js";
const CSS: &str = "https://cdn.test/a.css";

fn ok(body: &str, mime: &str) -> Result<HttpResponse, FetchError> {
    Ok(HttpResponse {
        status: 200,
        status_text: "OK".into(),
        final_url: String::new(),
        headers: vec![("content-type".into(), mime.into())],
        body: body.as_bytes().to_vec(),
        location: None,
    })
}

fn answer(p: &Provider<MemoryEnv>, url: &str, a: Result<HttpResponse, FetchError>) {
    p.env.http_answers.borrow_mut().insert(url.into(), a);
}

fn with_assets(name: &str, lines: &[&str], body: &str) -> String {
    format!(
        "// ==UserScript==\n// @name {name}\n// @namespace tests\n// @match https://example.com/*\n{}\n// ==/UserScript==\n{body}\n",
        lines.join("\n")
    )
}

/// Everything but the audit's bookkeeping.
fn stored(p: &Provider<MemoryEnv>) -> Map<String, Value> {
    p.env
        .dump(Area::Local)
        .into_iter()
        .filter(|(k, _)| !k.starts_with("audit"))
        .collect()
}

fn op(p: &Provider<MemoryEnv>, v: Value) -> Value {
    block_on(control::handle(p, &v)).value
}

fn blobs(p: &Provider<MemoryEnv>) -> Vec<String> {
    stored(p)
        .keys()
        .filter(|k| k.starts_with("asset/"))
        .cloned()
        .collect()
}

/// Every code entry of the script's registration, in order (the runtime with the GM getters,
/// then the `@require` code and the source).
fn code_of(p: &Provider<MemoryEnv>, uuid: &str) -> String {
    p.env.registrations.borrow()[uuid]
        .js
        .iter()
        .map(|c| c.code.clone().unwrap())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn written_with_its_files_then_never_fetched_again_for_the_same_urls() {
    let p = provider();
    let s = ready(&p);
    answer(&p, LIB, ok("var LIB_VERSION = 'one';", "text/javascript"));
    answer(&p, CSS, ok("body{color:red}", "text/css; charset=utf-8"));
    let src = with_assets(
        "Lib user",
        &[
            &format!("// @require {LIB}"),
            &format!("// @resource css {CSS}"),
            "// @grant GM_getResourceText",
        ],
        "console.log(LIB_VERSION);",
    );
    let r = call(&p, &s, "write_script", json!({"source": src}));
    assert_eq!(r["isError"], json!(false), "{r}");
    let uuid = r["structuredContent"]["script"]["uuid"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(p.env.fetched.borrow().len(), 2);
    // The record names each file with its sha256; the bytes are stored once by that hash.
    let got = call(&p, &s, "get_script", json!({"uuid": uuid}));
    let assets = got["structuredContent"]["script"]["assets"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(assets.len(), 2, "{got}");
    assert_eq!(assets[0]["url"], json!(LIB));
    assert_eq!(assets[1]["name"], json!("css"));
    assert_eq!(assets[1]["mime"], json!("text/css"));
    assert_eq!(blobs(&p).len(), 2);
    // The library runs before the source, in the same function; the resource is this
    // script's own.
    let code = code_of(&p, &uuid);
    let lib_at = code.find("var LIB_VERSION = 'one';").unwrap();
    assert!(lib_at < code.find("console.log(LIB_VERSION);").unwrap());
    assert!(code.contains("d('GM_getResourceText',T)"));
    assert!(code.contains("\"css\""));

    // The server now serves something else: an edit that keeps the URLs fetches nothing.
    answer(&p, LIB, ok("var LIB_VERSION = 'two';", "text/javascript"));
    let edited = src.replace("console.log(LIB_VERSION);", "console.info(LIB_VERSION);");
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 1, "source": edited}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(p.env.fetched.borrow().len(), 2);
    assert!(code_of(&p, &uuid).contains("'one'"));

    // Dropping the library and restoring revision 1 brings back what revision 1 stored,
    // without a fetch.
    let without = edited.replace(&format!("// @require {LIB}\n"), "");
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"uuid": uuid, "revision": 2, "source": without}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert!(!code_of(&p, &uuid).contains("LIB_VERSION = "));
    let r = call(
        &p,
        &s,
        "restore_script",
        json!({"uuid": uuid, "revision": 1, "current_revision": 3}),
    );
    assert_eq!(r["isError"], json!(false), "{r}");
    assert_eq!(p.env.fetched.borrow().len(), 2);
    assert!(code_of(&p, &uuid).contains("var LIB_VERSION = 'one';"));
}

#[test]
fn a_failed_fetch_a_bad_status_or_a_hash_mismatch_refuses_the_write_and_stores_nothing() {
    let p = provider();
    let s = ready(&p);
    let before = stored(&p);
    let cases: Vec<(String, Result<HttpResponse, FetchError>, &str)> = vec![
        (
            LIB.into(),
            Err(FetchError::Other("net::ERR_CONNECTION_REFUSED".into())),
            "ERR_CONNECTION_REFUSED",
        ),
        (
            LIB.into(),
            Ok(HttpResponse {
                status: 404,
                status_text: "Not Found".into(),
                final_url: String::new(),
                headers: vec![],
                body: vec![],
                location: None,
            }),
            "HTTP 404",
        ),
        (
            format!("{LIB}#sha256={}", "0".repeat(64)),
            ok("var x = 1;", "text/javascript"),
            "do not have the sha256",
        ),
        (
            LIB.into(),
            Ok(HttpResponse {
                status: 200,
                status_text: "OK".into(),
                final_url: "http://evil.test/lib.js".into(),
                headers: vec![],
                body: b"x".to_vec(),
                location: None,
            }),
            "redirected to http://evil.test/lib.js",
        ),
        // The browser stops reading a file past the bound: said as too large, not as a
        // network failure.
        (
            LIB.into(),
            Err(FetchError::TooLarge { max: 1_048_577 }),
            "is over the 1048576-byte limit for one file",
        ),
    ];
    for (url, a, says) in cases {
        answer(&p, LIB, a);
        let src = with_assets("Fails", &[&format!("// @require {url}")], "1;");
        let r = call(&p, &s, "write_script", json!({"source": src}));
        assert_eq!(r["isError"], json!(true), "{r}");
        let text = r["content"][0]["text"].as_str().unwrap();
        assert!(text.contains(LIB) && text.contains(says), "{text}");
        assert!(text.contains("not stored"), "{text}");
        assert_eq!(stored(&p), before, "{says}");
    }
    // A good file and a failing one: neither is stored.
    answer(&p, CSS, ok("body{}", "text/css"));
    answer(&p, LIB, Err(FetchError::Timeout));
    let src = with_assets(
        "Half",
        &[
            &format!("// @resource css {CSS}"),
            &format!("// @require {LIB}"),
        ],
        "1;",
    );
    let r = call(&p, &s, "write_script", json!({"source": src}));
    assert_eq!(r["isError"], json!(true), "{r}");
    assert_eq!(stored(&p), before);
}

#[test]
fn the_users_own_save_and_import_fetch_too_and_an_import_is_all_or_none() {
    let p = provider();
    answer(&p, LIB, ok("var L = 1;", "text/javascript"));
    let r = op(
        &p,
        json!({"op": "scripts.save", "source": with_assets("Mine", &[&format!("// @require {LIB}")], "L;")}),
    );
    assert_eq!(r["ok"], json!(true), "{r}");
    assert_eq!(p.env.fetched.borrow().len(), 1);
    assert_eq!(blobs(&p).len(), 1);
    let before = stored(&p);
    answer(
        &p,
        "https://cdn.test/gone.js",
        Err(FetchError::Other("net::ERR_NAME_NOT_RESOLVED".into())),
    );
    let r = op(
        &p,
        json!({"op": "scripts.import", "confirmed": true, "files": [
            {"name": "a.user.js", "source": with_assets("A", &[&format!("// @require {LIB}")], "1;")},
            {"name": "b.user.js", "source": with_assets("B", &["// @require https://cdn.test/gone.js"], "1;")},
        ]}),
    );
    assert_eq!(r["ok"], json!(false), "{r}");
    let e = r["error"].as_str().unwrap();
    assert!(
        e.contains("b.user.js") && e.contains("https://cdn.test/gone.js"),
        "{e}"
    );
    assert_eq!(stored(&p), before);
}

#[test]
fn bounds_are_checked_before_fetching() {
    let p = provider();
    let s = ready(&p);
    let many: Vec<String> = (0..17)
        .map(|i| format!("// @require https://cdn.test/{i}.js"))
        .collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"source": with_assets("Many", &refs, "1;")}),
    );
    assert_eq!(error_code(&r), Some("PAYLOAD_TOO_LARGE"), "{r}");
    assert!(p.env.fetched.borrow().is_empty());
    // Cleartext from another machine is refused at validation, before any fetch.
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"source": with_assets("Clear", &["// @require http://cdn.test/x.js"], "1;")}),
    );
    assert_eq!(error_code(&r), Some("INVALID_METADATA"), "{r}");
    assert!(p.env.fetched.borrow().is_empty());
}

#[test]
fn purging_a_script_removes_the_bytes_only_it_named() {
    let p = provider();
    answer(&p, LIB, ok("var SHARED = 1;", "text/javascript"));
    answer(&p, CSS, ok("only-mine", "text/css"));
    let a = op(
        &p,
        json!({"op": "scripts.save", "source": with_assets("A", &[&format!("// @require {LIB}"), &format!("// @resource c {CSS}")], "1;")}),
    );
    let b = op(
        &p,
        json!({"op": "scripts.save", "source": with_assets("B", &[&format!("// @require {LIB}")], "1;")}),
    );
    assert_eq!(blobs(&p).len(), 2, "{a} {b}");
    let uuid = a["result"]["script"]["uuid"].as_str().unwrap();
    op(&p, json!({"op": "scripts.delete", "uuid": uuid}));
    // In the trash it keeps its bytes (a restore brings it back whole)…
    assert_eq!(blobs(&p).len(), 2);
    op(&p, json!({"op": "trash.purge", "uuids": [uuid]}));
    // …purged, the library B still uses stays and A's own file goes.
    let left = blobs(&p);
    assert_eq!(left.len(), 1, "{left:?}");
    let stored = stored(&p);
    assert_eq!(
        lumo_userscripts::gm::assets::decode(stored[&left[0]].as_str().unwrap()).unwrap(),
        b"var SHARED = 1;"
    );
}

#[test]
fn slow_servers_cannot_hold_the_write_lock_past_the_budget() {
    let p = provider();
    let s = ready(&p);
    p.env.fetch_ms.set(20_000.0);
    let lines: Vec<String> = (0..3)
        .map(|i| format!("// @require https://slow.test/{i}.js"))
        .collect();
    let refs: Vec<&str> = lines.iter().map(String::as_str).collect();
    let before = stored(&p);
    let r = call(
        &p,
        &s,
        "write_script",
        json!({"source": with_assets("Slow", &refs, "1;")}),
    );
    assert_eq!(r["isError"], json!(true), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains("https://slow.test/2.js") && text.contains("ran out"),
        "{text}"
    );
    // The second fetch got only what was left of the 30 s; the third was never sent.
    let timeouts: Vec<u64> = p
        .env
        .fetched
        .borrow()
        .iter()
        .map(|r| r.timeout_ms)
        .collect();
    assert_eq!(timeouts, [20_000, 10_000]);
    assert!(p
        .env
        .fetched
        .borrow()
        .iter()
        .all(|r| r.anonymous && r.method == "GET"));
    assert_eq!(stored(&p), before);
}

/// A write's `@require` files are fetched under the write lock, for up to 30 s. The user
/// removing the caller, turning writes off or turning review on meanwhile stops the write
/// before anything is stored: the caller's script must not land, register and run.
#[test]
fn a_switch_flipped_while_a_write_fetches_its_files_stops_it() {
    for (op, code) in switches_withdrawn() {
        let p = provider();
        let s = ready(&p);
        answer(&p, LIB, ok("var LIB = 1;", "text/javascript"));
        p.env.fetch_yields.set(200);
        let before = stored(&p);
        let write = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "write_script", "arguments": {"source": with_assets("Late", &[&format!("// @require {LIB}")], "1;")}}});
        let meddle = async {
            for _ in 0..50 {
                lumo_userscripts::env::memory::yield_now().await;
            }
            assert_eq!(p.env.fetched.borrow().len(), 1, "the fetch is under way");
            let done = control::handle(&p, &op).await;
            assert_eq!(done.value["ok"], json!(true), "{op}");
        };
        let (r, ()) = block_on(futures::future::join(p.handle_mcp(&s, &write), meddle));
        let r = reply(r)["result"].clone();
        assert_eq!(r["isError"], json!(true), "{op}: {r}");
        assert_eq!(error_code(&r), Some(code), "{r}");
        let after = stored(&p);
        let scripts = |m: &Map<String, Value>| -> Vec<String> {
            m.keys()
                .filter(|k| {
                    k.starts_with("script/") || k.starts_with("source/") || k.starts_with("asset/")
                })
                .cloned()
                .collect()
        };
        assert_eq!(scripts(&after), scripts(&before), "{op}: nothing stored");
        assert!(
            p.env.registrations.borrow().is_empty(),
            "{op}: nothing registered"
        );
        let audit = block_on(lumo_userscripts::guard::audit::read_all(&p.env)).unwrap();
        assert_eq!(audit[0].result, code, "{op}: audited as refused");
    }
}
