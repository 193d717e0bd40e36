//! The probe module (probe/) answers a cold probe before the provider's module has loaded; what
//! it answers must be what the provider answers for the same stored policy, toggle and time, and
//! it must say when the provider has to record the probe.

mod common;

use common::HOST;
use futures::executor::block_on;
use lumo_userscripts::env::memory::MemoryEnv;
use lumo_userscripts::env::{Area, Storage};
use lumo_userscripts::probe::{answer_early, answer_early_json, Early, Toggle};
use lumo_userscripts::provider::{keys, Provider};
use serde_json::{json, Value};

const STRANGER: &str = "abcdefghijklmnopabcdefghijklmnop";
const ON: &str = "Error in invocation of userScripts.getScripts(optional userScripts.UserScriptFilter filter, optional function callback): No matching signature.";
const OFF: &str = "'userScripts.getScripts' is not available in this context.";

fn probe(client: &str) -> String {
    json!({"channel": "lumo:probe", "version": 1, "id": "p-1",
           "client": {"id": client, "name": "Some host", "version": "1.0"}})
    .to_string()
}

/// Stored policies: none, one approving HOST (seen just now, or long ago), one with the endpoint
/// off, one that denied STRANGER, and one full of pending callers.
fn policies(now: f64) -> Vec<Option<Value>> {
    let entry = |seen: f64| json!({"id": HOST, "name": "Host", "addedAt": 1, "lastSeen": seen});
    let pending: Vec<Value> = (0..20)
        .map(|i| json!({"id": format!("{:a>32}", char::from(b'b' + (i % 20) as u8)), "name": "x", "firstSeen": i, "lastSeen": i}))
        .collect();
    vec![
        None,
        Some(json!({"allowlist": [entry(now - 1_000.0)]})),
        Some(json!({"allowlist": [entry(now - 3_600_000.0)]})),
        Some(json!({"endpointEnabled": false, "allowlist": [entry(now)]})),
        Some(json!({"denied": [{"id": STRANGER, "name": "Stranger"}]})),
        Some(json!({"pending": pending})),
        Some(json!("not a policy")),
        Some(Value::Null),
        // Damaged entries: each decoder must skip the same ones (the probe module reads storage
        // with its own JSON reader, the provider with serde_json).
        Some(json!({"allowlist": [{"id": HOST, "name": "Host"}]})),
        Some(json!({"allowlist": [[HOST, "Host", 1, null]]})),
        Some(json!({"allowlist": [{"id": HOST, "name": 5, "addedAt": 1}]})),
        Some(json!({"allowlist": [{"id": HOST, "name": "Host", "addedAt": "1"}]})),
        Some(json!({"allowlist": [{"id": HOST, "name": "Host", "addedAt": 1.5, "lastSeen": "x"}]})),
        Some(
            json!({"allowlist": [{"id": HOST, "name": "Host", "addedAt": 1.5, "lastSeen": now - 0.25, "extra": [1]}]}),
        ),
        Some(json!({"allowlist": {"id": HOST}, "endpointEnabled": "no", "writesEnabled": null})),
        Some(json!({"pending": [{"id": STRANGER, "name": "Stranger", "firstSeen": 1}]})),
        Some(json!({"denied": [{"id": STRANGER, "name": "Stranger", "at": -1e3}]})),
    ]
}

/// The provider's own answer, and whether it stored a changed policy.
fn provider_answer(
    stored: Option<&Value>,
    available: bool,
    now: f64,
    text: &str,
    sender: Option<&str>,
) -> (Value, bool) {
    let env = MemoryEnv::new();
    env.now.set(now);
    env.user_scripts.set(available);
    if let Some(v) = stored {
        let mut m = serde_json::Map::new();
        m.insert(keys::POLICY.to_owned(), v.clone());
        block_on(env.set(Area::Local, m)).unwrap();
    }
    let before = env.dump(Area::Local).get(keys::POLICY).cloned();
    let p = Provider::new(env);
    let reply: Value =
        serde_json::from_str(&block_on(p.probe(Some(text), sender)).to_json()).unwrap();
    let after = p.env.dump(Area::Local).get(keys::POLICY).cloned();
    (reply, before != after)
}

#[test]
fn the_probe_module_answers_what_the_provider_answers_and_says_when_to_record() {
    let now = 1_800_000_000_000.0;
    let texts = [
        probe(HOST),
        probe(STRANGER),
        json!({"channel": "lumo:probe", "version": 2, "id": "p-2"}).to_string(),
        "{\"channel\": \"lumo:probe\"".to_owned(),
        json!(["not", "an object"]).to_string(),
        // Nesting past what either parser reads: named as such by both (found by an
        // exploratory pass: "not valid JSON").
        format!(
            r#"{{"channel":"lumo:probe","version":1,"x":{}{}}}"#,
            "[".repeat(200),
            "]".repeat(200)
        ),
    ];
    let mut records = 0;
    let mut cases = 0;
    for stored in policies(now) {
        for (available, toggle) in [
            (true, json!({"refused": ON})),
            (false, json!({"refused": OFF})),
            (false, json!("missing")),
        ] {
            for text in &texts {
                for sender in [Some(HOST), Some(STRANGER), Some("not an id"), None] {
                    let (want, wrote) =
                        provider_answer(stored.as_ref(), available, now, text, sender);
                    // What the probe module is given by the loader (sw.js), and what it answers.
                    let mut input =
                        json!({"text": text, "sender": sender, "toggle": toggle, "now": now});
                    if let Some(policy) = &stored {
                        input["policy"] = policy.clone();
                    }
                    let got: Value =
                        serde_json::from_str(&answer_early_json(&input.to_string())).unwrap();
                    assert!(
                        got.get("defer").is_none(),
                        "deferred a probe the provider answers at once: {text}: {got}"
                    );
                    assert_eq!(
                        got["reply"], want,
                        "stored {stored:?}, toggle {available}, {text}, from {sender:?}"
                    );
                    let record = got["record"].as_bool().unwrap();
                    assert_eq!(
                        record, wrote,
                        "record flag: stored {stored:?}, {text}, from {sender:?}"
                    );
                    records += usize::from(record);
                    cases += 1;
                }
            }
        }
    }
    // The matrix holds both kinds: probes that change nothing, and ones the provider must record
    // (a stranger's first probe, an approved caller's lastSeen after an hour).
    assert!(records > 10 && records < cases, "{records} of {cases}");
}

#[test]
fn the_probe_module_defers_what_only_the_provider_can_answer() {
    let now = 1_800_000_000_000.0;
    let text = probe(HOST);
    // Chrome did not refuse the toggle check, or refused it with a message not known here: the
    // provider asks Chrome for real.
    for toggle in [
        Toggle::NotRefused,
        Toggle::Refused("some message of a later Chrome"),
    ] {
        assert!(matches!(
            answer_early::<Value>(Some(&text), Some(HOST), None, toggle, now),
            Early::Defer(_)
        ));
    }
    // The wire: a reply, a deferral, and input the loader could not have meant.
    let wire =
        |v: Value| serde_json::from_str::<Value>(&answer_early_json(&v.to_string())).unwrap();
    let r = wire(
        json!({"text": text, "sender": HOST, "policy": null, "toggle": {"refused": ON}, "now": now}),
    );
    assert_eq!(r["reply"]["status"]["pendingApproval"], json!(true), "{r}");
    assert_eq!(r["record"], json!(true), "{r}");
    let r = wire(json!({"text": text, "sender": HOST, "toggle": "missing", "now": now}));
    assert_eq!(r["reply"]["status"]["ready"], json!(false), "{r}");
    let r = wire(json!({"text": text, "sender": HOST, "toggle": {}, "now": now}));
    assert!(r["defer"].is_string(), "{r}");
    let r = wire(json!({"text": text, "sender": HOST, "toggle": {"refused": ON}}));
    assert!(r["defer"].is_string(), "no time: {r}");
    let huge = json!({"text": "x".repeat(lumo_userscripts::probe::MAX_EARLY_INPUT_BYTES), "toggle": {"refused": ON}, "now": now});
    assert!(
        wire(huge)["defer"].is_string(),
        "more than any probe and policy is not read"
    );
    let r = serde_json::from_str::<Value>(&answer_early_json("{not json")).unwrap();
    assert!(r["defer"].is_string(), "{r}");
    // A probe with no JSON form (undefined) is refused as the provider refuses it.
    let r = wire(json!({"text": null, "sender": HOST, "toggle": {"refused": ON}, "now": now}));
    assert_eq!(r["reply"]["ok"], json!(false), "{r}");
}
