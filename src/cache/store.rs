//! Where stored answers are kept: [`AnswerStore`], and [`MemoryCache`], an
//! in-memory LRU bounded by entries and bytes.

use std::cell::RefCell;
use std::time::Duration;

use lru::LruCache;

use crate::platform::UnixMillis;
use crate::provider::LocalFuture;

/// A place answers are kept, by key. Values are opaque bytes
/// ([`super::Stored::to_bytes`]), so a store may be anything that holds
/// bytes for a while: memory, a data centre's HTTP cache, Redis.
pub trait AnswerStore {
    /// The value stored under `key`, if there is one still kept at `now`.
    fn get<'a>(&'a self, key: &'a str, now: UnixMillis) -> LocalFuture<'a, Option<Vec<u8>>>;
    /// Keeps `value` under `key` for `keep` from `now`. A store that writes
    /// elsewhere does so in the background; a write may be dropped.
    fn put(&self, key: &str, value: Vec<u8>, now: UnixMillis, keep: Duration);
    /// What the store is and holds, as far as it knows (the status page).
    fn describe(&self) -> StoreInfo {
        StoreInfo {
            kind: "custom",
            entries: None,
            bytes: None,
        }
    }
}

/// What a store says of itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreInfo {
    /// `memory`, `edge` (a data centre's HTTP cache) or `custom`.
    pub kind: &'static str,
    /// The answers it holds, where it can count them.
    pub entries: Option<usize>,
    /// Their bytes, where it can count them.
    pub bytes: Option<usize>,
}

/// An in-memory LRU: at most `max_entries` answers and `max_bytes` of
/// them, the least recently used dropped first, each dropped too once
/// its time is up.
pub struct MemoryCache {
    inner: RefCell<Inner>,
    max_entries: usize,
    max_bytes: usize,
}

struct Inner {
    lru: LruCache<String, Kept>,
    bytes: usize,
}

struct Kept {
    value: Vec<u8>,
    until: UnixMillis,
}

impl MemoryCache {
    /// A store of at most `max_entries` answers and `max_bytes` bytes.
    pub fn new(max_entries: usize, max_bytes: usize) -> MemoryCache {
        MemoryCache {
            inner: RefCell::new(Inner {
                lru: LruCache::unbounded(),
                bytes: 0,
            }),
            max_entries,
            max_bytes,
        }
    }

    /// How many answers it holds, and their bytes.
    pub fn size(&self) -> (usize, usize) {
        let inner = self.inner.borrow();
        (inner.lru.len(), inner.bytes)
    }
}

/// What an entry counts against the byte bound: its value and its key.
fn weight(key: &str, kept: &Kept) -> usize {
    key.len() + kept.value.len()
}

impl AnswerStore for MemoryCache {
    fn get<'a>(&'a self, key: &'a str, now: UnixMillis) -> LocalFuture<'a, Option<Vec<u8>>> {
        let mut inner = self.inner.borrow_mut();
        let found = match inner.lru.get(key) {
            Some(kept) if kept.until > now => Some(kept.value.clone()),
            Some(_) => {
                if let Some(old) = inner.lru.pop(key) {
                    inner.bytes -= weight(key, &old);
                }
                None
            }
            None => None,
        };
        Box::pin(std::future::ready(found))
    }

    fn describe(&self) -> StoreInfo {
        let (entries, bytes) = self.size();
        StoreInfo {
            kind: "memory",
            entries: Some(entries),
            bytes: Some(bytes),
        }
    }

    fn put(&self, key: &str, value: Vec<u8>, now: UnixMillis, keep: Duration) {
        let kept = Kept {
            value,
            until: now.saturating_add(crate::platform::millis(keep)),
        };
        let mut inner = self.inner.borrow_mut();
        if let Some(old) = inner.lru.pop(key) {
            inner.bytes -= weight(key, &old);
        }
        let w = weight(key, &kept);
        if w > self.max_bytes || self.max_entries == 0 {
            return;
        }
        inner.bytes += w;
        inner.lru.put(key.to_string(), kept);
        while inner.lru.len() > self.max_entries || inner.bytes > self.max_bytes {
            match inner.lru.pop_lru() {
                Some((k, old)) => inner.bytes -= weight(&k, &old),
                None => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    fn get(s: &MemoryCache, key: &str, now: UnixMillis) -> Option<Vec<u8>> {
        s.get(key, now).now_or_never().unwrap()
    }

    const MIN: Duration = Duration::from_secs(60);

    #[test]
    fn kept_until_its_time() {
        let s = MemoryCache::new(10, 1000);
        s.put("a", b"one".to_vec(), 1000, MIN);
        assert_eq!(get(&s, "a", 1000), Some(b"one".to_vec()));
        assert_eq!(get(&s, "a", 60_999), Some(b"one".to_vec()));
        assert_eq!(get(&s, "a", 61_000), None);
        assert_eq!(s.size(), (0, 0));
        assert_eq!(get(&s, "b", 0), None);
    }

    #[test]
    fn bounded_by_entries_least_recent_first() {
        let s = MemoryCache::new(2, 1000);
        s.put("a", b"1".to_vec(), 0, MIN);
        s.put("b", b"2".to_vec(), 0, MIN);
        assert!(get(&s, "a", 0).is_some()); // a is now the most recent
        s.put("c", b"3".to_vec(), 0, MIN);
        assert_eq!(get(&s, "b", 0), None);
        assert!(get(&s, "a", 0).is_some());
        assert!(get(&s, "c", 0).is_some());
        assert_eq!(s.size(), (2, 4));
    }

    #[test]
    fn bounded_by_bytes() {
        let s = MemoryCache::new(100, 20);
        s.put("a", vec![0; 9], 0, MIN); // 10
        s.put("b", vec![0; 9], 0, MIN); // 20
        assert_eq!(s.size(), (2, 20));
        s.put("c", vec![0; 4], 0, MIN); // 25: a goes
        assert_eq!(get(&s, "a", 0), None);
        assert_eq!(s.size(), (2, 15));
        s.put("big", vec![0; 30], 0, MIN); // never fits
        assert_eq!(get(&s, "big", 0), None);
        assert_eq!(s.size(), (2, 15));
        s.put("b", vec![0; 1], 0, MIN); // replaced: its old bytes freed
        assert_eq!(s.size(), (2, 7));
    }

    #[test]
    fn a_long_run_of_distinct_answers_stays_within_both_bounds() {
        let s = MemoryCache::new(100, 4096);
        for i in 0..20_000u32 {
            let len = (i % 97) as usize;
            s.put(&format!("k{i}"), vec![0; len], 0, MIN);
            let (entries, bytes) = s.size();
            assert!(
                entries <= 100 && bytes <= 4096,
                "{entries} entries, {bytes} bytes"
            );
        }
        assert!(get(&s, "k19999", 0).is_some(), "the newest is kept");
        assert_eq!(get(&s, "k0", 0), None, "the oldest went");
    }

    #[test]
    fn no_room_at_all() {
        let s = MemoryCache::new(0, 1000);
        s.put("a", b"1".to_vec(), 0, MIN);
        assert_eq!(s.size(), (0, 0));
    }
}
