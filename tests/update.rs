//! Script updates by hand (`scripts.checkUpdate`, `scripts.update`): the check fetches the
//! script's update URL under the `@require` rules and shows a newer version before anything is
//! stored; Update stores exactly the reviewed bytes as the user's write (history, Undo, audit
//! `update_script`, `via update`), keeping the on/off state and the GM values. Every refusal
//! leaves storage as it was.

mod common;

use common::*;
use futures::executor::block_on;
use lumo_userscripts::control;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::{Area, FetchError, HttpResponse};
use lumo_userscripts::guard::audit;
use lumo_userscripts::provider::Provider;
use serde_json::{json, Map, Value};

const USER_JS: &str = "https://up.test/helper.user.js";
const META_JS: &str = "https://up.test/helper.meta.js";
const LIB: &str = "https://cdn.test/lib.js";

fn op(p: &Provider<MemoryEnv>, v: Value) -> Value {
    block_on(control::handle(p, &v)).value
}

fn ok(body: impl Into<Vec<u8>>) -> Result<HttpResponse, FetchError> {
    Ok(HttpResponse {
        status: 200,
        status_text: "OK".into(),
        final_url: String::new(),
        headers: vec![("content-type".into(), "text/javascript".into())],
        body: body.into(),
        location: None,
    })
}

fn status(code: u16) -> Result<HttpResponse, FetchError> {
    Ok(HttpResponse {
        status: code,
        status_text: String::new(),
        final_url: String::new(),
        headers: Vec::new(),
        body: b"oops".to_vec(),
        location: None,
    })
}

fn redirect(to: &str) -> Result<HttpResponse, FetchError> {
    Ok(HttpResponse {
        status: 302,
        status_text: String::new(),
        final_url: String::new(),
        headers: Vec::new(),
        body: Vec::new(),
        location: Some(to.into()),
    })
}

fn serve(p: &Provider<MemoryEnv>, url: &str, a: Result<HttpResponse, FetchError>) {
    p.env.http_answers.borrow_mut().insert(url.into(), a);
}

/// The helper script at `version`, its header's extra lines and its code.
fn helper(namespace: &str, version: &str, extra: &[&str], body: &str) -> String {
    format!(
        "// ==UserScript==\n// @name Helper\n// @namespace {namespace}\n// @version {version}\n// @match https://example.com/*\n{}// ==/UserScript==\n{body}\n",
        extra.iter().map(|l| format!("// {l}\n")).collect::<String>()
    )
}

fn v1(url_lines: &[&str]) -> String {
    helper("tests", "1.0", url_lines, "console.log('v1');")
}

fn create(p: &Provider<MemoryEnv>, source: &str) -> String {
    let r = op(p, json!({"op": "scripts.save", "source": source}));
    assert_eq!(r["ok"], json!(true), "{r}");
    r["result"]["script"]["uuid"].as_str().unwrap().to_owned()
}

fn source_of(p: &Provider<MemoryEnv>, uuid: &str) -> String {
    op(p, json!({"op": "scripts.get", "uuid": uuid}))["script"]["source"]
        .as_str()
        .unwrap()
        .to_owned()
}

fn local(p: &Provider<MemoryEnv>) -> Map<String, Value> {
    p.env.dump(Area::Local)
}

#[test]
fn check_shows_the_newer_version_then_update_stores_it_as_the_users_undoable_write() {
    let p = provider();
    let old = v1(&[&format!("@updateURL {USER_JS}"), "@grant GM_setValue"]);
    let uuid = create(&p, &old);
    // Its values, which an update keeps; and switched off, which it keeps too.
    put(&p, [(format!("values/{uuid}"), json!({"count": "3"}))]);
    let off = op(
        &p,
        json!({"op": "scripts.setEnabled", "uuid": uuid, "enabled": false}),
    );
    assert_eq!(off["ok"], json!(true), "{off}");
    let new = helper(
        "tests",
        "2.0",
        &[
            &format!("@updateURL {USER_JS}"),
            "@grant GM_setValue",
            "@grant GM_xmlhttpRequest",
            "@connect api.example.org",
            &format!("@require {LIB}"),
            "@match https://other.example/*",
        ],
        "console.log('v2');",
    );
    serve(&p, USER_JS, ok(new.clone()));
    serve(&p, LIB, ok("var LIB = 1;"));

    // The listing offers the check.
    let list = op(&p, json!({"op": "scripts.list"}));
    assert_eq!(list["scripts"][0]["updateUrl"], json!(USER_JS));

    let before = local(&p);
    let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(c["ok"], json!(true), "{c}");
    assert_eq!(c["update"], json!(true));
    assert_eq!(c["installed"], json!("1.0"));
    assert_eq!(c["offered"], json!("2.0"));
    assert_eq!(c["revision"], json!(2));
    let effects: Vec<&str> = c["effects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e.as_str().unwrap())
        .collect();
    for want in [
        "Asks for @grant GM_xmlhttpRequest",
        "api.example.org",
        "This script loads code from https://cdn.test/lib.js",
        "Now also runs on",
        "Version 1.0 → 2.0",
    ] {
        assert!(
            effects.iter().any(|e| e.contains(want)),
            "{want} not in {effects:?}"
        );
    }
    assert!(
        !effects.iter().any(|e| e.contains("enables")),
        "the on/off state does not change: {effects:?}"
    );
    assert_eq!(c["hosts"], json!(["cdn.test"]));
    let diff = c["diff"].as_str().unwrap();
    assert!(diff.contains("-console.log('v1');"), "{diff}");
    assert!(diff.contains("+console.log('v2');"), "{diff}");
    // The new library is shown, fetched for the check; the check is a read: nothing stored,
    // nothing audited.
    let files = c["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{c}");
    assert_eq!(files[0]["label"], json!("@require"));
    assert_eq!(files[0]["url"], json!(LIB));
    assert_eq!(files[0]["text"], json!("var LIB = 1;"));
    assert_eq!(local(&p), before);
    // It asked the way Violentmonkey asks, without cookies.
    let asked = p.env.fetched.borrow()[0].clone();
    assert_eq!(asked.url, USER_JS);
    assert!(asked.anonymous);
    assert!(asked
        .headers
        .iter()
        .any(|(k, v)| k == "Accept" && v.starts_with("text/x-userscript-meta")));

    p.env.advance(1000.0);
    let u = op(
        &p,
        json!({"op": "scripts.update", "uuid": uuid, "revision": 2, "sha256": c["sha256"], "files": [files[0]["id"]], "via": "options page"}),
    );
    assert_eq!(u["ok"], json!(true), "{u}");
    let s = &u["result"]["script"];
    assert_eq!(s["revision"], json!(3));
    assert_eq!(s["version"], json!("2.0"));
    assert_eq!(s["enabled"], json!(false), "kept off");
    assert_eq!(s["updatedBy"], json!("user"));
    assert_eq!(s["updatedVia"], json!("update"));
    assert_eq!(source_of(&p, &uuid), new);
    assert_eq!(local(&p)[&format!("values/{uuid}")], json!({"count": "3"}));
    // Its @require was fetched as for any write, and stored.
    assert!(local(&p).keys().any(|k| k.starts_with("asset/")));
    // Audited as the user's update, at the revision it made.
    let e = block_on(audit::read_all(&p.env)).unwrap()[0].clone();
    assert_eq!(
        (e.tool.as_str(), e.caller.as_str(), e.result.as_str()),
        ("update_script", "user", "ok")
    );
    assert_eq!(e.revision, Some(3));
    let audited = op(&p, json!({"op": "audit.list"}));
    assert_eq!(audited["undoable"][0], json!(0), "{audited}");
    // The history holds v1; the popup's Undo brings it back.
    let h = op(&p, json!({"op": "scripts.revisions", "uuid": uuid}));
    assert_eq!(h["revisions"][0]["via"], json!("update"), "{h}");
    let undone = op(
        &p,
        json!({"op": "scripts.undo", "uuid": uuid, "caller": "user", "at": e.at, "via": "popup"}),
    );
    assert_eq!(undone["ok"], json!(true), "{undone}");
    assert_eq!(source_of(&p, &uuid), old);
}

#[test]
fn a_meta_js_check_url_then_the_download_url() {
    let p = provider();
    let uuid = create(
        &p,
        &v1(&[
            &format!("@updateURL {META_JS}"),
            &format!("@downloadURL {USER_JS}"),
        ]),
    );
    let new = helper(
        "tests",
        "1.1",
        &[
            &format!("@updateURL {META_JS}"),
            &format!("@downloadURL {USER_JS}"),
        ],
        "console.log('v1.1');",
    );
    let header =
        new.split("// ==/UserScript==").next().unwrap().to_owned() + "// ==/UserScript==\n";
    serve(&p, META_JS, ok(header));
    serve(&p, USER_JS, ok(new.clone()));
    let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(c["update"], json!(true), "{c}");
    assert_eq!(p.env.fetched_urls(), [META_JS, USER_JS]);
    // A download that is not a valid script is refused whole.
    serve(
        &p,
        USER_JS,
        ok(helper("tests", "1.1", &["@match nope"], "")),
    );
    let before = local(&p);
    let bad = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(bad["reason"], json!("invalid"), "{bad}");
    assert!(bad["error"]
        .as_str()
        .unwrap()
        .contains("the new version is not a script this provider stores"));
    assert_eq!(local(&p), before);
    // The server's words in that refusal are marked as everywhere else: a direction
    // character cannot reorder what the page says.
    serve(
        &p,
        USER_JS,
        ok(helper("tests", "1.1", &["@match \u{202e}nope"], "")),
    );
    let bad = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    let e = bad["error"].as_str().unwrap();
    assert_eq!(bad["reason"], json!("invalid"), "{bad}");
    assert!(e.contains("⟨U+202E⟩nope") && !e.contains('\u{202e}'), "{e}");
    serve(&p, USER_JS, ok(new.clone()));
    // Up to date once stored: the same version is no update.
    let u = op(
        &p,
        json!({"op": "scripts.update", "uuid": uuid, "revision": 1, "sha256": c["sha256"]}),
    );
    assert_eq!(u["ok"], json!(true), "{u}");
    let again = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(again["update"], json!(false), "{again}");
    assert!(again["message"].as_str().unwrap().starts_with("Up to date"));
}

/// A script whose only URL is a `.meta.js` is checked there, but the header alone is never
/// offered as the new version: stored, it would be the script without its code. (Before, the
/// check fetched the `.meta.js` again as the "full" script and offered that, the code removed.)
#[test]
fn a_meta_js_alone_says_a_newer_version_exists_and_offers_no_header_as_the_script() {
    let p = provider();
    let uuid = create(&p, &v1(&[&format!("@updateURL {META_JS}")]));
    let new = helper(
        "tests",
        "1.1",
        &[&format!("@updateURL {META_JS}")],
        "console.log('v1.1');",
    );
    let header =
        new.split("// ==/UserScript==").next().unwrap().to_owned() + "// ==/UserScript==\n";
    serve(&p, META_JS, ok(header));
    let before = local(&p);
    let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(c["ok"], json!(false), "{c}");
    assert_eq!(c["reason"], json!("no-download"), "{c}");
    let e = c["error"].as_str().unwrap();
    assert!(
        e.starts_with(&format!(
            "version 1.1 is available, but {META_JS} holds the header alone"
        )),
        "{e}"
    );
    assert!(e.ends_with("the script was not changed"), "{e}");
    assert_eq!(p.env.fetched_urls(), [META_JS]);
    let u = op(
        &p,
        json!({"op": "scripts.update", "uuid": uuid, "revision": 1, "sha256": "0".repeat(64)}),
    );
    assert_eq!(u["reason"], json!("no-download"), "{u}");
    assert_eq!(local(&p), before);
    assert!(source_of(&p, &uuid).contains("console.log('v1');"));
    // Up to date, it says so as for any script.
    serve(&p, META_JS, ok(v1(&[&format!("@updateURL {META_JS}")])));
    let same = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(same["update"], json!(false), "{same}");
    assert_eq!(same["downloadUrl"], json!(null), "{same}");
}

/// Every hostile or broken answer is refused with its reason, and storage is left as it was.
#[test]
fn refusals_name_their_reason_and_change_nothing() {
    let huge = format!("{}\n{}", v1(&[]), "x".repeat(256 * 1024));
    // One byte over the bound: what the browser reads whole, and the core refuses.
    let mut one_over = v1(&[]);
    one_over.push_str(&"x".repeat(256 * 1024 + 1 - one_over.len()));
    let cases: Vec<(&str, Result<HttpResponse, FetchError>, &str, &str)> = vec![
        (
            "another namespace",
            ok(helper("evil", "9.0", &[], "steal();")),
            "not-this-script",
            "not an update of this script: the server sent \"Helper\" (@namespace \"evil\")",
        ),
        (
            "no version",
            ok("// ==UserScript==\n// @name Helper\n// @namespace tests\n// @match https://example.com/*\n// ==/UserScript==\n"),
            "no-version",
            "has no @version",
        ),
        ("not a header", ok("<html>hi</html>"), "header", "no readable // ==UserScript== header"),
        ("server error", status(500), "status", "HTTP 500"),
        ("too large", ok(huge), "too-large", "over the limit for a script"),
        ("one byte too large", ok(one_over), "too-large", "over the limit for a script"),
        (
            "too large, as the browser stops reading it",
            Err(FetchError::TooLarge { max: 262_145 }),
            "too-large",
            "sent more than 262144 bytes, over the limit for a script",
        ),
        (
            "a redirect elsewhere over http",
            redirect("http://evil.test/x.user.js"),
            "url-refused",
            "redirected to http://evil.test/x.user.js: only https URLs are loaded",
        ),
        (
            "a redirect onto this computer",
            redirect("http://127.0.0.1:9/x.user.js"),
            "url-refused",
            "a server elsewhere may not lead a fetch onto this computer",
        ),
        (
            "a redirect to a file",
            redirect("file:///etc/passwd"),
            "url-refused",
            "redirected to file:///etc/passwd: only https URLs are loaded, not file:",
        ),
        (
            "a redirect to an extension's page",
            redirect("chrome-extension://abcdefghijklmnopabcdefghijklmnop/x.user.js"),
            "url-refused",
            "only https URLs are loaded, not chrome-extension:",
        ),
        (
            "a redirect into the local network",
            redirect("https://192.168.1.1/x.user.js"),
            "url-refused",
            "a server on the internet may not lead a fetch into your local network",
        ),
        ("not UTF-8", ok(vec![0xff, 0xfe, 0x00]), "not-text", "UTF-8"),
        ("the network", Err(FetchError::Other("connection refused".into())), "fetch", "connection refused"),
    ];
    for (what, answer, reason, message) in cases {
        let p = provider();
        let uuid = create(&p, &v1(&[&format!("@updateURL {USER_JS}")]));
        serve(&p, USER_JS, answer);
        let before = local(&p);
        let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
        assert_eq!(c["ok"], json!(false), "{what}: {c}");
        assert_eq!(c["reason"], json!(reason), "{what}: {c}");
        let error = c["error"].as_str().unwrap();
        assert!(error.contains(message), "{what}: {error}");
        assert!(
            error.ends_with("the script was not changed"),
            "{what}: {error}"
        );
        // Update refuses the same way, with any sha256.
        let u = op(
            &p,
            json!({"op": "scripts.update", "uuid": uuid, "revision": 1, "sha256": "0".repeat(64)}),
        );
        assert_eq!(u["reason"], json!(reason), "{what}: {u}");
        assert_eq!(local(&p), before, "{what}: storage changed");
        assert!(
            !p.env
                .fetched
                .borrow()
                .iter()
                .any(|r| r.url.contains("evil.test") || r.url.contains("127.0.0.1")),
            "{what}: a refused redirect was followed"
        );
    }
}

#[test]
fn an_older_or_equal_version_is_no_update_and_cannot_be_stored() {
    for (version, said) in [
        (
            "0.9",
            "No update: the server offers version 0.9, older than the installed 1.0.",
        ),
        (
            "1.0",
            "Up to date: the server's version is 1.0, as installed (1.0).",
        ),
        // R17: a version written otherwise that compares equal is not said to be the same.
        (
            "1.0.0",
            "No update: the server offers version 1.0.0, which compares equal to the installed 1.0",
        ),
    ] {
        let p = provider();
        let uuid = create(&p, &v1(&[&format!("@updateURL {USER_JS}")]));
        let older = helper("tests", version, &[], "console.log('old');");
        serve(&p, USER_JS, ok(older));
        let before = local(&p);
        let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
        assert_eq!(
            (c["ok"].clone(), c["update"].clone()),
            (json!(true), json!(false)),
            "{c}"
        );
        assert!(c["message"].as_str().unwrap().starts_with(said), "{c}");
        // Whatever the sha256: an older or equal version is never stored.
        let sha = "0".repeat(64);
        let u = op(
            &p,
            json!({"op": "scripts.update", "uuid": uuid, "revision": 1, "sha256": sha}),
        );
        assert_eq!(u["reason"], json!("not-newer"), "{u}");
        assert!(u["error"]
            .as_str()
            .unwrap()
            .contains("is not newer than the installed 1.0"));
        assert_eq!(local(&p), before);
    }
}

#[test]
fn update_stores_only_what_was_reviewed_over_the_revision_checked() {
    let p = provider();
    let uuid = create(&p, &v1(&[&format!("@updateURL {USER_JS}")]));
    serve(&p, USER_JS, ok(helper("tests", "2.0", &[], "reviewed();")));
    let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    // The server changes what it sends after the review.
    serve(&p, USER_JS, ok(helper("tests", "2.0", &[], "swapped();")));
    let before = local(&p);
    let u = op(
        &p,
        json!({"op": "scripts.update", "uuid": uuid, "revision": 1, "sha256": c["sha256"]}),
    );
    assert_eq!(u["reason"], json!("changed"), "{u}");
    assert_eq!(local(&p), before);
    // Back to what was reviewed, but the user edited the script since the check: a conflict.
    serve(&p, USER_JS, ok(helper("tests", "2.0", &[], "reviewed();")));
    let edited = op(
        &p,
        json!({"op": "scripts.save", "uuid": uuid, "revision": 1, "source": helper("tests", "1.5", &[&format!("@updateURL {USER_JS}")], "mine();")}),
    );
    assert_eq!(edited["ok"], json!(true), "{edited}");
    let u = op(
        &p,
        json!({"op": "scripts.update", "uuid": uuid, "revision": 1, "sha256": c["sha256"]}),
    );
    assert_eq!(u["code"], json!("CONFLICT"), "{u}");
    assert!(source_of(&p, &uuid).contains("mine();"));
    // A @require that cannot be fetched refuses the check (it is fetched to be shown), and
    // nothing is stored; Update then refuses too.
    let with_lib = helper("tests", "3.0", &[&format!("@require {LIB}")], "lib();");
    serve(&p, USER_JS, ok(with_lib));
    serve(&p, LIB, ok("lib();"));
    let shown = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(shown["update"], json!(true), "{shown}");
    serve(&p, LIB, status(404));
    let before = local(&p);
    let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(c["ok"], json!(false), "{c}");
    assert!(c["error"].as_str().unwrap().contains("HTTP 404"), "{c}");
    let u = op(
        &p,
        json!({"op": "scripts.update", "uuid": uuid, "revision": 2, "sha256": shown["sha256"], "files": [shown["files"][0]["id"]]}),
    );
    assert_eq!(u["ok"], json!(false), "{u}");
    assert!(u["error"].as_str().unwrap().contains("HTTP 404"), "{u}");
    assert_eq!(local(&p), before);
}

#[test]
fn a_script_without_an_update_url_or_with_one_not_allowed() {
    let p = provider();
    let plain = create(&p, &v1(&[]));
    let r = op(&p, json!({"op": "scripts.checkUpdate", "uuid": plain}));
    assert_eq!(r["reason"], json!("no-url"), "{r}");
    assert!(op(&p, json!({"op": "scripts.list"}))["scripts"][0]
        .get("updateUrl")
        .is_none());
    let p = provider();
    let clear = create(&p, &v1(&["@updateURL http://up.test/helper.user.js"]));
    let r = op(&p, json!({"op": "scripts.checkUpdate", "uuid": clear}));
    assert_eq!(r["reason"], json!("url-refused"), "{r}");
    assert!(p.env.fetched.borrow().is_empty());
    // Any other scheme is named and refused before anything is asked.
    for (url, scheme) in [
        ("file:///home/me/x.user.js", "file:"),
        ("data:text/javascript,alert(1)", "data:"),
        ("javascript:alert(1)", "javascript:"),
        (
            "chrome-extension://abcdefghijklmnopabcdefghijklmnop/x.user.js",
            "chrome-extension:",
        ),
    ] {
        let q = provider();
        let u = create(&q, &v1(&[&format!("@downloadURL {url}")]));
        let r = op(&q, json!({"op": "scripts.checkUpdate", "uuid": u}));
        assert_eq!(r["reason"], json!("url-refused"), "{url}: {r}");
        assert!(
            r["error"]
                .as_str()
                .unwrap()
                .contains(&format!("only https URLs are loaded, not {scheme}")),
            "{url}: {r}"
        );
        assert!(q.env.fetched.borrow().is_empty(), "{url}");
    }
    for bad in [
        json!({"op": "scripts.checkUpdate"}),
        json!({"op": "scripts.update", "uuid": clear, "revision": 1}),
        json!({"op": "scripts.update", "uuid": clear, "sha256": "0".repeat(64)}),
    ] {
        let r = op(&p, bad.clone());
        assert_eq!(r["ok"], json!(false), "{bad}");
        assert!(
            r["error"].as_str().is_some_and(|e| e.starts_with('"')),
            "{r}"
        );
    }
}

/// A script deleted (to the trash) between the check and the click on Update is not brought
/// back by it, nor changed in the trash: the update is refused and storage is left as it was.
#[test]
fn a_script_deleted_since_the_check_is_not_updated() {
    let p = provider();
    let uuid = create(&p, &v1(&[&format!("@updateURL {USER_JS}")]));
    serve(&p, USER_JS, ok(helper("tests", "2.0", &[], "reviewed();")));
    let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(c["update"], json!(true), "{c}");
    let d = op(&p, json!({"op": "scripts.delete", "uuid": uuid}));
    assert_eq!(d["ok"], json!(true), "{d}");
    let before = local(&p);
    let u = op(
        &p,
        json!({"op": "scripts.update", "uuid": uuid, "revision": 1, "sha256": c["sha256"]}),
    );
    assert_eq!(u["ok"], json!(false), "{u}");
    assert_eq!(local(&p), before);
    let t = op(&p, json!({"op": "trash.list"}));
    assert_eq!(t["scripts"][0]["uuid"], json!(uuid), "{t}");
}

/// An update that adds a library stores the library's bytes the user was shown, or nothing: the
/// server (the script's, or the library's) answering otherwise at Update is refused.
#[test]
fn update_stores_the_new_files_it_showed_or_nothing() {
    let p = provider();
    let uuid = create(&p, &v1(&[&format!("@updateURL {USER_JS}")]));
    let new = helper(
        "tests",
        "2.0",
        &[&format!("@updateURL {USER_JS}"), &format!("@require {LIB}")],
        "console.log('v2');",
    );
    serve(&p, USER_JS, ok(new.clone()));
    serve(&p, LIB, ok("var LIB = 'shown';"));
    let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(c["files"][0]["text"], json!("var LIB = 'shown';"), "{c}");
    let shown = c["files"][0]["id"].clone();
    let stored_sha = c["files"][0]["sha256"].clone();
    let before = local(&p);
    let update = |files: Value| {
        op(
            &p,
            json!({"op": "scripts.update", "uuid": uuid, "revision": 1, "sha256": c["sha256"], "files": files}),
        )
    };
    // Swapped after the check.
    serve(&p, LIB, ok("steal(document.cookie);"));
    let u = update(json!([shown]));
    assert_eq!(u["reason"], json!("changed"), "{u}");
    assert_eq!(local(&p), before, "nothing stored");
    // A page that sends no list (or another) cannot store files it did not show.
    serve(&p, LIB, ok("var LIB = 'shown';"));
    for files in [Value::Null, json!([]), json!(["0".repeat(64)])] {
        let u = update(files.clone());
        assert_eq!(u["reason"], json!("changed"), "{files}: {u}");
    }
    assert_eq!(local(&p), before, "nothing stored");
    // The bytes shown: stored, and what the registration runs.
    let u = update(json!([shown]));
    assert_eq!(u["ok"], json!(true), "{u}");
    assert_eq!(u["result"]["script"]["assets"][0]["sha256"], stored_sha);
    let code: String = p.env.registrations.borrow()[&uuid]
        .js
        .iter()
        .filter_map(|c| c.code.clone())
        .collect();
    assert!(code.contains("var LIB = 'shown';"), "{code}");
}

/// R7: the same bytes under another charset at Update ran other code than the dialog showed
/// (iso-2022-jp turns a comment into code): a file's id binds its type and charset too.
#[test]
fn update_refuses_the_same_bytes_read_in_another_charset() {
    let p = provider();
    let uuid = create(&p, &v1(&[&format!("@updateURL {USER_JS}")]));
    let new = helper(
        "tests",
        "2.0",
        &[&format!("@updateURL {USER_JS}"), &format!("@require {LIB}")],
        "lib();",
    );
    serve(&p, USER_JS, ok(new));
    let answer = |ct: &str| {
        Ok(HttpResponse {
            status: 200,
            status_text: "OK".into(),
            final_url: String::new(),
            headers: vec![("content-type".into(), ct.into())],
            body: b"var s = '\xe9';".to_vec(),
            location: None,
        })
    };
    serve(&p, LIB, answer("text/javascript"));
    let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    let id = c["files"][0]["id"].clone();
    serve(&p, LIB, answer("text/javascript; charset=windows-1252"));
    let before = local(&p);
    let u = op(
        &p,
        json!({"op": "scripts.update", "uuid": uuid, "revision": 1, "sha256": c["sha256"], "files": [id]}),
    );
    assert_eq!(u["reason"], json!("changed"), "{u}");
    assert_eq!(local(&p), before, "nothing stored");
}

/// An update whose new files cannot be shown whole (the dialog cannot ask for the rest) is not
/// offered; "Check all" fetches no file, and says none were checked.
#[test]
fn an_update_whose_files_cannot_be_shown_whole_is_not_offered() {
    let p = provider();
    let uuid = create(&p, &v1(&[&format!("@updateURL {USER_JS}")]));
    let new = helper(
        "tests",
        "2.0",
        &[&format!("@updateURL {USER_JS}"), &format!("@require {LIB}")],
        "lib();",
    );
    serve(&p, USER_JS, ok(new));
    serve(&p, LIB, ok("\n".repeat(300_000)));
    let all = op(
        &p,
        json!({"op": "scripts.checkUpdate", "uuid": uuid, "files": false}),
    );
    assert_eq!(
        (all["update"].clone(), all["files"].clone()),
        (json!(true), Value::Null),
        "{all}"
    );
    assert!(
        !p.env.fetched.borrow().iter().any(|r| r.url == LIB),
        "Check all fetched a file"
    );
    let c = op(&p, json!({"op": "scripts.checkUpdate", "uuid": uuid}));
    assert_eq!(c["reason"], json!("files-not-shown"), "{c}");
    assert!(c["error"].as_str().unwrap().contains("300000 lines"), "{c}");
}
