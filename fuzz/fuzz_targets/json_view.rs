//! The probe's JSON reader (`json_view`) against serde_json on any text: never a panic; it reads
//! exactly what serde_json reads (after the shell's lone-surrogate repair), and every decoder sees
//! the same values; what it writes back is JSON that reads the same again.
#![no_main]
use libfuzzer_sys::fuzz_target;
use lumo_userscripts::json_view::{self, Json, JsonView};
use serde_json::Value;

fn agree(a: &Json<'_>, b: &Value) {
    assert_eq!(a.is_object(), JsonView::is_object(b));
    assert_eq!(a.is_null(), JsonView::is_null(b));
    assert_eq!(a.as_bool(), JsonView::as_bool(b));
    assert_eq!(a.as_str(), JsonView::as_str(b));
    assert_eq!(a.is_number(), JsonView::is_number(b));
    assert_eq!(a.as_u64(), JsonView::as_u64(b), "{a:?} {b}");
    // serde_json's default float parsing may be one step off a correctly rounded one for long
    // decimals; both must at least agree on whether there is a number.
    assert_eq!(a.as_f64().is_some(), JsonView::as_f64(b).is_some(), "{a:?} {b}");
    match (a.as_array(), JsonView::as_array(b)) {
        (Some(x), Some(y)) => {
            assert_eq!(x.len(), y.len());
            x.iter().zip(y).for_each(|(x, y)| agree(x, y));
        }
        (x, y) => assert_eq!(x.is_some(), y.is_some()),
    }
    if let Value::Object(m) = b {
        for (k, v) in m {
            agree(a.get(k).expect("a key serde_json read"), v);
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let ours = json_view::parse(text);
    let theirs = lumo_userscripts::text::parse_json(text);
    assert_eq!(ours.is_ok(), theirs.is_ok(), "{ours:?} vs {theirs:?}");
    if let (Ok(ours), Ok(theirs)) = (&ours, &theirs) {
        agree(ours, theirs);
    }
    if let Ok(v) = ours {
        let mut out = String::new();
        json_view::write_json(&mut out, &v);
        let again = json_view::parse(&out).expect("our own output reads");
        assert_eq!(again, v);
    }
});
