//! Conversation histories by thread id.
//!
//! AG-Kit clients send only the messages new since their last request, so the
//! gateway keeps what it received plus what the agent said. The trait lets a
//! shared backend (Redis) replace the embedded one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use babelgate_core::request::Message;

pub trait ConversationStore: Send + Sync {
    /// The history of `thread`, oldest first (empty when unknown or expired).
    fn history(&self, thread: &str) -> Vec<Message>;
    /// Appends messages to `thread`'s history and refreshes its expiry.
    fn append(&self, thread: &str, messages: Vec<Message>);
}

/// In-memory store, bounded both ways: entries expire after `ttl` idle, and
/// past `max_threads` the least recently used thread is evicted; a thread
/// keeps at most `max_messages` (the oldest are dropped first).
pub struct MemoryStore {
    ttl: Duration,
    max_threads: usize,
    max_messages: usize,
    inner: Mutex<HashMap<String, Entry>>,
}

struct Entry {
    messages: Vec<Message>,
    touched: Instant,
}

impl MemoryStore {
    pub fn new(ttl: Duration, max_threads: usize, max_messages: usize) -> Self {
        MemoryStore {
            ttl,
            max_threads: max_threads.max(1),
            max_messages: max_messages.max(1),
            inner: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Entry>> {
        // A panic elsewhere while holding the lock leaves plain data behind;
        // keep serving rather than poison every later request.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Default for MemoryStore {
    fn default() -> Self {
        MemoryStore::new(Duration::from_secs(24 * 3600), 10_000, 1_000)
    }
}

impl ConversationStore for MemoryStore {
    fn history(&self, thread: &str) -> Vec<Message> {
        let mut map = self.lock();
        match map.get_mut(thread) {
            Some(e) if e.touched.elapsed() <= self.ttl => {
                e.touched = Instant::now();
                e.messages.clone()
            }
            Some(_) => {
                map.remove(thread);
                Vec::new()
            }
            None => Vec::new(),
        }
    }

    fn append(&self, thread: &str, messages: Vec<Message>) {
        let mut map = self.lock();
        let now = Instant::now();
        map.retain(|_, e| now.duration_since(e.touched) <= self.ttl);
        if !map.contains_key(thread) && map.len() >= self.max_threads {
            if let Some(oldest) = map
                .iter()
                .min_by_key(|(_, e)| e.touched)
                .map(|(k, _)| k.clone())
            {
                map.remove(&oldest);
            }
        }
        let entry = map.entry(thread.to_string()).or_insert_with(|| Entry {
            messages: Vec::new(),
            touched: now,
        });
        entry.touched = now;
        entry.messages.extend(messages);
        let excess = entry.messages.len().saturating_sub(self.max_messages);
        entry.messages.drain(..excess);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use babelgate_core::Role;

    fn msg(id: &str) -> Message {
        Message::text_message(id, Role::User, id)
    }

    #[test]
    fn appends_in_order_and_bounds_messages() {
        let s = MemoryStore::new(Duration::from_secs(60), 10, 3);
        s.append("t", vec![msg("a"), msg("b")]);
        s.append("t", vec![msg("c"), msg("d")]);
        let ids: Vec<_> = s.history("t").into_iter().map(|m| m.id).collect();
        assert_eq!(ids, ["b", "c", "d"]);
        assert!(s.history("other").is_empty());
    }

    #[test]
    fn evicts_least_recently_used_thread_past_the_cap() {
        let s = MemoryStore::new(Duration::from_secs(60), 2, 10);
        s.append("a", vec![msg("1")]);
        s.append("b", vec![msg("2")]);
        let _ = s.history("a"); // a is now fresher than b
        s.append("c", vec![msg("3")]);
        assert!(s.history("b").is_empty());
        assert_eq!(s.history("a").len(), 1);
        assert_eq!(s.history("c").len(), 1);
    }

    #[test]
    fn expired_threads_are_forgotten() {
        let s = MemoryStore::new(Duration::ZERO, 10, 10);
        s.append("a", vec![msg("1")]);
        std::thread::sleep(Duration::from_millis(2));
        assert!(s.history("a").is_empty());
    }
}
