//! The channel key in `chrome.storage.local` (`channel/key`): made once, kept across worker and
//! browser restarts, made again only if it is lost (then every token changes and the next
//! reconcile re-registers every script).

use super::token::{ChannelKey, KEY_STORAGE};
use crate::env::{Area, EnvError, Ids, Storage};
use serde_json::{Map, Value};

/// The stored key, if there is a valid one.
pub async fn load<E: Storage>(env: &E) -> Option<ChannelKey> {
    env.get(Area::Local, &[KEY_STORAGE])
        .await
        .ok()?
        .get(KEY_STORAGE)
        .and_then(Value::as_str)
        .and_then(ChannelKey::parse)
}

/// The stored key, made and stored first if there is none. Callers hold the write lock, so two
/// tasks never make two keys. A read that fails makes none: a new key would change every
/// token, and every registered script's channel would be cut until it is registered again.
pub async fn ensure<E: Storage + Ids>(env: &E) -> Result<ChannelKey, EnvError> {
    made(env).await.map(|(k, _)| k)
}

/// [`ensure`], and whether the key was made now: every registered script's token is then
/// wrong, and the registry must be reconciled.
pub async fn made<E: Storage + Ids>(env: &E) -> Result<(ChannelKey, bool), EnvError> {
    let got = env.get(Area::Local, &[KEY_STORAGE]).await?;
    if let Some(k) = got
        .get(KEY_STORAGE)
        .and_then(Value::as_str)
        .and_then(ChannelKey::parse)
    {
        return Ok((k, false));
    }
    let key = ChannelKey::from_uuids(&env.new_uuid(), &env.new_uuid())
        .ok_or_else(|| EnvError("could not make a channel key".into()))?;
    let mut m = Map::new();
    m.insert(
        KEY_STORAGE.to_owned(),
        Value::String(key.as_str().to_owned()),
    );
    env.set(Area::Local, m).await?;
    Ok((key, true))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::env::memory::MemoryEnv;
    use futures::executor::block_on;

    #[test]
    fn the_key_is_made_once_and_kept() {
        let env = MemoryEnv::new();
        assert!(block_on(load(&env)).is_none());
        let k = block_on(ensure(&env)).unwrap();
        assert_eq!(block_on(ensure(&env)).unwrap(), k);
        assert_eq!(block_on(load(&env)), Some(k.clone()));
        // A damaged key is replaced.
        let mut m = Map::new();
        m.insert(KEY_STORAGE.to_owned(), Value::String("short".into()));
        block_on(env.set(Area::Local, m)).unwrap();
        assert!(block_on(load(&env)).is_none());
        let made = block_on(ensure(&env)).unwrap();
        assert_ne!(made, k);
        let k = made;
        // A read that fails makes no new key, and leaves the stored one as it is.
        env.fail_gets.borrow_mut().push(KEY_STORAGE.to_owned());
        assert!(block_on(ensure(&env)).is_err());
        env.fail_gets.borrow_mut().clear();
        assert_eq!(block_on(load(&env)), Some(k));
    }
}
