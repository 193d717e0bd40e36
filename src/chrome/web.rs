//! [`WebPlatform`] over the service worker's own `URL`, `RegExp`, `toLowerCase` and
//! `TextDecoder` (V8, the engine the guard runs in). Bound with `catch`: a throw becomes an
//! `Err`, never a trap. Decides nothing.

use crate::web::{path_query, ParsedUrl, WebError, WebPlatform};
use wasm_bindgen::prelude::*;

#[wasm_bindgen]
extern "C" {
    #[wasm_bindgen(js_name = URL)]
    type JsUrl;
    #[wasm_bindgen(constructor, js_class = URL, catch)]
    fn new(input: &str) -> Result<JsUrl, JsValue>;
    #[wasm_bindgen(method, getter)]
    fn href(this: &JsUrl) -> String;
    #[wasm_bindgen(method, getter)]
    fn protocol(this: &JsUrl) -> String;
    #[wasm_bindgen(method, getter)]
    fn hostname(this: &JsUrl) -> String;
    #[wasm_bindgen(method, getter)]
    fn port(this: &JsUrl) -> String;
    #[wasm_bindgen(method, getter)]
    fn pathname(this: &JsUrl) -> String;
    #[wasm_bindgen(method, getter)]
    fn search(this: &JsUrl) -> String;

    #[wasm_bindgen(js_name = RegExp)]
    type JsRegExp;
    #[wasm_bindgen(constructor, js_class = RegExp, catch)]
    fn new(source: &str, flags: &str) -> Result<JsRegExp, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn test(this: &JsRegExp, input: &str) -> Result<bool, JsValue>;

    #[wasm_bindgen(js_name = TextDecoder)]
    type JsTextDecoder;
    #[wasm_bindgen(constructor, js_class = TextDecoder, catch)]
    fn new(label: &str) -> Result<JsTextDecoder, JsValue>;
    #[wasm_bindgen(method, catch)]
    fn decode(this: &JsTextDecoder, bytes: &[u8]) -> Result<String, JsValue>;
}

fn error(e: JsValue) -> WebError {
    WebError(
        js_sys::Error::from(e)
            .message()
            .as_string()
            .unwrap_or_else(|| "the browser refused it".to_owned()),
    )
}

/// The browser itself.
pub struct Browser;

impl WebPlatform for Browser {
    fn parse_url(&self, input: &str) -> Result<ParsedUrl, WebError> {
        let u = JsUrl::new(input).map_err(error)?;
        let href = u.href();
        let protocol = u.protocol();
        let port = u.port();
        let port = if port.is_empty() {
            None
        } else {
            Some(
                port.parse::<u16>()
                    .map_err(|_| WebError(format!("unexpected port {port:?}")))?,
            )
        };
        Ok(ParsedUrl {
            scheme: protocol.strip_suffix(':').unwrap_or(&protocol).to_owned(),
            host: u.hostname(),
            port,
            path_query: path_query(&href, &u.pathname(), &u.search()),
            href,
        })
    }

    fn regex_compile_check(&self, source: &str, flags: &str) -> Result<(), WebError> {
        JsRegExp::new(source, flags).map(|_| ()).map_err(error)
    }

    fn regex_test(&self, source: &str, flags: &str, input: &str) -> Result<bool, WebError> {
        JsRegExp::new(source, flags)
            .map_err(error)?
            .test(input)
            .map_err(error)
    }

    fn lowercase(&self, input: &str) -> String {
        String::from(js_sys::JsString::from(input).to_lower_case())
    }

    fn decode(&self, bytes: &[u8], label: &str) -> Option<String> {
        // A label the Encoding Standard does not know throws a RangeError.
        JsTextDecoder::new(label).ok()?.decode(bytes).ok()
    }
}
