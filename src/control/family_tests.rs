//! The typed op families (`bridge_ops`, `by_hand`, `import_ops`): every wire name the pages send
//! parses to its variant, an unknown one is refused as before, and a wrong-shaped argument
//! reaches the op's function, which refuses it naming the field (the pages show these texts).

use super::*;
use crate::env::memory::MemoryEnv;
use crate::env::Area;
use futures::executor::block_on;

fn call(p: &Provider<MemoryEnv>, v: Value) -> Value {
    block_on(handle(p, &v)).value
}

/// Whether an op is the variant a name must parse to.
type IsVariant = fn(&Op) -> bool;

const UUID: &str = "00000000-0000-4000-8000-000000000000";

#[test]
fn every_family_wire_name_parses_to_its_variant() {
    let cases: [(&str, IsVariant); 15] = [
        ("bridge.status", |o| {
            matches!(o, Op::Bridge(BridgeOp::Status { .. }))
        }),
        ("bridge.connect", |o| {
            matches!(o, Op::Bridge(BridgeOp::Connect { .. }))
        }),
        ("bridge.disconnect", |o| {
            matches!(o, Op::Bridge(BridgeOp::Disconnect))
        }),
        ("scripts.revisions", |o| {
            matches!(o, Op::ByHand(HandOp::Revisions { .. }))
        }),
        ("scripts.revision", |o| {
            matches!(o, Op::ByHand(HandOp::Revision { .. }))
        }),
        ("scripts.restore", |o| {
            matches!(o, Op::ByHand(HandOp::Restore { .. }))
        }),
        ("scripts.undo", |o| {
            matches!(o, Op::ByHand(HandOp::Undo { .. }))
        }),
        ("scripts.save", |o| {
            matches!(o, Op::ByHand(HandOp::Save { .. }))
        }),
        ("scripts.checkUpdate", |o| {
            matches!(o, Op::ByHand(HandOp::CheckUpdate { .. }))
        }),
        ("scripts.update", |o| {
            matches!(o, Op::ByHand(HandOp::Update { .. }))
        }),
        ("trash.list", |o| matches!(o, Op::ByHand(HandOp::TrashList))),
        ("trash.purge", |o| {
            matches!(o, Op::ByHand(HandOp::TrashPurge { .. }))
        }),
        ("scripts.import", |o| {
            matches!(o, Op::Import(ImportOp::Import { .. }))
        }),
        ("backup.export", |o| {
            matches!(o, Op::Import(ImportOp::Export { .. }))
        }),
        ("backup.restore", |o| {
            matches!(o, Op::Import(ImportOp::Restore { .. }))
        }),
    ];
    for (name, is) in cases {
        // Extra fields (the channel, `via`) are ignored; the name alone decides the variant.
        let op = Op::parse(&json!({"op": name, "channel": CONTROL_CHANNEL, "via": "popup"}));
        assert!(op.as_ref().is_ok_and(is), "{name}: {op:?}");
    }
    for name in [
        "bridge.nope",
        "trash.nope",
        "backup.nope",
        "scripts.imports",
        "",
    ] {
        assert!(
            matches!(Op::parse(&json!({"op": name})), Ok(Op::Unknown(n)) if n == name),
            "{name}"
        );
    }
}

/// Fields are typed: the right type is carried, a wrong one becomes "absent"/"wrong" for the
/// op's function to refuse (not a parse error that would read as an unknown op).
#[test]
fn family_fields_are_read_by_type() {
    assert!(matches!(
        Op::parse(&json!({"op": "bridge.connect", "host": 5, "port": 17817, "token": "t"})),
        Ok(Op::Bridge(BridgeOp::Connect {
            host: args::Arg::Wrong,
            port: Some(17817),
            ..
        }))
    ));
    assert!(matches!(
        Op::parse(&json!({"op": "scripts.save", "uuid": null, "source": "x"})),
        Ok(Op::ByHand(HandOp::Save {
            uuid: args::Arg::Absent,
            source: Some(_),
            ..
        }))
    ));
    assert!(matches!(
        Op::parse(&json!({"op": "scripts.undo", "uuid": UUID, "caller": "c", "at": 5})),
        Ok(Op::ByHand(HandOp::Undo { at: Some(a), .. })) if a == 5.0
    ));
    assert!(matches!(
        Op::parse(&json!({"op": "backup.restore", "text": 1, "keep": "x"})),
        Ok(Op::Import(ImportOp::Restore {
            text: None,
            keep: args::Arg::Wrong,
            ..
        }))
    ));
}

#[test]
fn wrong_shaped_arguments_are_refused_by_name_and_change_nothing() {
    let p = Provider::new(MemoryEnv::new());
    for (msg, want) in [
        (json!({"op": "bridge.nope"}), "unknown operation \"bridge.nope\""),
        (
            json!({"op": "bridge.connect", "host": 5, "port": 17817}),
            "\"host\" must be a string",
        ),
        (
            json!({"op": "bridge.connect", "port": "17817"}),
            "\"port\" must be a number (1–65535)",
        ),
        (
            json!({"op": "bridge.connect", "port": 17817, "token": 7}),
            "the link has no token: open the connect link the bridge printed",
        ),
        (
            json!({"op": "scripts.revisions", "uuid": 1}),
            "\"uuid\" must be a script uuid",
        ),
        (
            json!({"op": "scripts.revision", "uuid": UUID, "revision": 0}),
            "\"revision\" must be a revision (1 or more)",
        ),
        (
            json!({"op": "scripts.restore", "uuid": UUID, "revision": 1, "currentRevision": "2"}),
            "\"currentRevision\" must be a revision (1 or more)",
        ),
        (
            json!({"op": "scripts.undo", "uuid": UUID, "caller": "c", "at": "now"}),
            "\"caller\" and \"at\" must name the audited write",
        ),
        (
            json!({"op": "scripts.save", "source": ["x"]}),
            "\"source\" must be the script's text",
        ),
        (
            json!({"op": "scripts.save", "source": "x", "uuid": 5, "revision": 1}),
            "\"uuid\" must be a script uuid",
        ),
        (
            json!({"op": "scripts.checkUpdate", "uuid": 5}),
            "\"uuid\" must be a script uuid",
        ),
        (
            json!({"op": "scripts.update", "uuid": UUID, "revision": 1, "sha256": "ABC"}),
            "\"sha256\" must be the sha256 of the version the check showed",
        ),
        (
            json!({"op": "trash.purge", "uuids": "all"}),
            "\"uuids\" must be a list of script uuids",
        ),
        (
            json!({"op": "trash.purge", "uuids": [UUID, 3]}),
            "\"uuids\" must be script uuids",
        ),
        (
            json!({"op": "scripts.import", "files": {"name": "a"}}),
            "\"files\" must list {name, source}",
        ),
        (
            json!({"op": "scripts.import", "files": [{"name": "a.user.js"}]}),
            "a.user.js: no source; nothing was imported",
        ),
        (
            json!({"op": "scripts.import", "files": [], "replace": "x"}),
            "\"replace\" must list script uuids",
        ),
        (
            json!({"op": "backup.restore", "text": 3}),
            "\"text\" must be the backup file's text",
        ),
        (
            json!({"op": "backup.restore", "text": "{}", "keep": ["nope"]}),
            "not a Lumo Userscripts backup (no \"format\": \"lumo-userscripts-backup\"); nothing was restored",
        ),
    ] {
        let r = call(&p, msg.clone());
        assert_eq!(r["ok"], json!(false), "{msg}");
        assert_eq!(r["error"], json!(want), "{msg}");
    }
    assert!(
        p.env.dump(Area::Local).is_empty(),
        "a refusal wrote nothing"
    );
    assert!(block_on(p.bridge_auth()).is_none());
}

/// The families run through the dispatcher end to end: a save by hand creates, the trash
/// lists, an export carries the script, and the bridge's disconnect returns its effect.
#[test]
fn family_ops_run_through_the_dispatcher() {
    let p = Provider::new(MemoryEnv::new());
    let src =
        "// ==UserScript==\n// @name T\n// @match https://example.com/*\n// ==/UserScript==\n";
    let r = call(&p, json!({"op": "scripts.save", "source": src}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let r = call(&p, json!({"op": "trash.list"}));
    assert_eq!(r["scripts"], json!([]), "{r}");
    let r = call(&p, json!({"op": "backup.export"}));
    assert_eq!(r["ok"], json!(true), "{r}");
    assert!(r["backup"].to_string().contains("@name T"), "{r}");
    let r = block_on(handle(&p, &json!({"op": "bridge.disconnect"})));
    assert!(matches!(
        r.effects.as_slice(),
        [Effect::CloseBridge { code: 4002, .. }]
    ));
}

#[test]
fn the_scripts_list_carries_chromes_refusal_of_a_registration() {
    let p = Provider::new(MemoryEnv::new());
    let src = |n: &str| {
        format!("// ==UserScript==\n// @name {n}\n// @match https://example.com/*\n// ==/UserScript==\n")
    };
    let a = call(&p, json!({"op": "scripts.save", "source": src("A")}));
    let b = call(&p, json!({"op": "scripts.save", "source": src("B")}));
    let (a, b) = (
        &a["result"]["script"]["uuid"],
        &b["result"]["script"]["uuid"],
    );
    block_on(p.set_registration_errors(
        &[(
            a.as_str().unwrap().to_owned(),
            "You may only configure up to 100".into(),
        )],
        &[],
    ));
    let r = call(&p, json!({"op": "scripts.list"}));
    let row = |u: &Value| {
        r["scripts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| &s["uuid"] == u)
            .cloned()
            .unwrap()
    };
    assert_eq!(
        row(a)["registrationError"],
        json!("You may only configure up to 100")
    );
    assert!(row(b).get("registrationError").is_none(), "{r}");
}

/// A rule is given to the page as Chrome reads it: an invisible character marked, and where the
/// rule alone misleads, what it really names. An `@exclude` with a zero-width space after it
/// would exclude nothing, so it is refused at its line; an `@include` with one runs nowhere and
/// says so; an `@exclude-match` of a look-alike host names the site the browser reads.
#[test]
fn the_scripts_list_marks_invisible_characters_in_rules_and_requests() {
    let p = Provider::new(MemoryEnv::new());
    let refused = "// ==UserScript==\n// @name Helper\n// @match *://*/*\n\
                   // @exclude *://bank.example/*\u{200b}\n// ==/UserScript==\n";
    let r = call(&p, json!({"op": "scripts.save", "source": refused}));
    assert_eq!(r["ok"], json!(false), "{r}");
    let why = r["error"].as_str().unwrap();
    assert!(
        why.contains("line 4") && why.contains("would exclude no page") && why.contains("U+200B"),
        "{why}"
    );
    let src = "// ==UserScript==\n// @name Helper\n// @version 1.0\u{202e}\n\
               // @match *://*/*\n// @include *://bank.example/*\u{200b}\n\
               // @exclude-match *://b\u{430}nk.example/*\n\
               // @connect bank.example\u{200b}\n// @grant GM_xmlhttpRequest\n// ==/UserScript==\n";
    let r = call(&p, json!({"op": "scripts.save", "source": src}));
    assert_eq!(r["ok"], json!(true), "{r}");
    let r = call(&p, json!({"op": "scripts.list"}));
    let s = &r["scripts"][0];
    let include = s["includeGlobs"][0].as_str().unwrap();
    assert!(
        include.starts_with("*://bank.example/*\u{27e8}U+200B\u{27e9} (no page at all: "),
        "{s}"
    );
    let exclude = s["excludeMatches"][0].as_str().unwrap();
    assert!(
        exclude.contains("the browser reads it as xn--"),
        "a look-alike host is shown with the name Chrome matches: {exclude}"
    );
    assert_eq!(s["connects"], json!(["bank.example\u{27e8}U+200B\u{27e9}"]));
    assert_eq!(s["version"], json!("1.0\u{27e8}U+202E\u{27e9}"));
    assert_eq!(s["matches"], json!(["*://*/*"]), "nothing else changes");
}
