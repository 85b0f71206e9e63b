//! What is open in a stream: the run, text and reasoning messages, tool calls,
//! collaboration messages. Every encoder keeps one so that `finish` and error
//! paths can close exactly what is open, in one shared way.

use std::collections::VecDeque;

use crate::event::{Event, EventKind};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RunState {
    #[default]
    NotStarted,
    Running,
    Ended,
}

/// Tracks open items in the order they were opened.
#[derive(Debug, Clone, Default)]
pub struct OpenTracker {
    pub run: RunState,
    texts: OpenList<()>,
    reasoning: OpenList<()>,
    reasoning_phases: OpenList<()>,
    /// By call id: the tool name.
    tool_calls: OpenList<String>,
    collabs: OpenList<()>,
    steps: Vec<Option<String>>,
}

/// Past this many open items of one kind, a list is indexed.
const INDEXED: usize = 32;

/// Ids open at once, in the order they opened, an id opened twice counted
/// twice. A well-formed stream has one or two open at a time, and a short
/// list searched in place is the fastest there is. An upstream that opens
/// thousands and never closes them would make every event search them all,
/// so past [`INDEXED`] entries the list is kept by id and by order instead:
/// each step O(log n), whatever the upstream does. That form is made of
/// persistent maps, so a copy is O(1) too (the AG-UI encoder copies its view
/// of the client before a change it may have to undo).
#[derive(Debug, Clone)]
pub enum OpenList<V: Clone> {
    Small(Vec<(String, V)>),
    Indexed {
        /// Opening order (a counter) to the item.
        order: imbl::OrdMap<u64, (String, V)>,
        /// Each id's places in `order`, oldest first.
        by_id: imbl::HashMap<String, VecDeque<u64>>,
        next: u64,
    },
}

impl<V: Clone> Default for OpenList<V> {
    fn default() -> Self {
        OpenList::Small(Vec::new())
    }
}

impl<V: Clone> OpenList<V> {
    pub fn push(&mut self, id: String, value: V) {
        match self {
            OpenList::Small(items) => {
                items.push((id, value));
                if items.len() > INDEXED {
                    let mut indexed = OpenList::Indexed {
                        order: imbl::OrdMap::new(),
                        by_id: imbl::HashMap::new(),
                        next: 0,
                    };
                    for (id, value) in std::mem::take(items) {
                        indexed.push(id, value);
                    }
                    *self = indexed;
                }
            }
            OpenList::Indexed { order, by_id, next } => {
                by_id.entry(id.clone()).or_default().push_back(*next);
                order.insert(*next, (id, value));
                *next += 1;
            }
        }
    }

    /// Closes the oldest `id`; false when none is open.
    pub fn remove(&mut self, id: &str) -> bool {
        self.take(id).is_some()
    }

    /// Closes the oldest `id` and gives its value.
    pub fn take(&mut self, id: &str) -> Option<V> {
        let taken = match self {
            OpenList::Small(items) => {
                let i = items.iter().position(|(x, _)| x == id)?;
                Some(items.remove(i).1)
            }
            OpenList::Indexed { order, by_id, .. } => {
                let places = by_id.get_mut(id)?;
                let at = places.pop_front();
                if places.is_empty() {
                    by_id.remove(id);
                }
                at.and_then(|at| order.remove(&at)).map(|(_, v)| v)
            }
        };
        self.shrink();
        taken
    }

    /// Closes every `id`.
    pub fn remove_all(&mut self, id: &str) {
        match self {
            OpenList::Small(items) => items.retain(|(x, _)| x != id),
            OpenList::Indexed { order, by_id, .. } => {
                for at in by_id.remove(id).unwrap_or_default() {
                    order.remove(&at);
                }
            }
        }
        self.shrink();
    }

    /// Closes everything.
    pub fn clear(&mut self) {
        *self = OpenList::default();
    }

    /// Closes everything and gives what was open, oldest first.
    pub fn take_all(&mut self) -> Vec<(String, V)> {
        match std::mem::take(self) {
            OpenList::Small(items) => items,
            OpenList::Indexed { order, .. } => order.into_iter().map(|(_, x)| x).collect(),
        }
    }

    /// Back to a plain list once few are open (a quarter of the threshold,
    /// so a count hovering around it does not switch at every step).
    ///
    /// An empty plain list lets its room go: a stream keeps its lists for
    /// its whole life, mostly empty between messages.
    fn shrink(&mut self) {
        match self {
            OpenList::Indexed { order, .. } => {
                if order.len() <= INDEXED / 4 {
                    let items = std::mem::take(order).into_iter().map(|(_, x)| x).collect();
                    *self = OpenList::Small(items);
                }
            }
            OpenList::Small(items) => {
                if items.is_empty() {
                    *items = Vec::new();
                }
            }
        }
    }

    pub fn contains(&self, id: &str) -> bool {
        match self {
            OpenList::Small(items) => items.iter().any(|(x, _)| x == id),
            OpenList::Indexed { by_id, .. } => by_id.contains_key(id),
        }
    }

    /// The value of the oldest open `id`.
    pub fn get(&self, id: &str) -> Option<&V> {
        match self {
            OpenList::Small(items) => items.iter().find(|(x, _)| x == id).map(|(_, v)| v),
            OpenList::Indexed { order, by_id, .. } => {
                let at = by_id.get(id)?.front()?;
                order.get(at).map(|(_, v)| v)
            }
        }
    }

    /// The value of the oldest open `id`, to change.
    pub fn get_mut(&mut self, id: &str) -> Option<&mut V> {
        match self {
            OpenList::Small(items) => items.iter_mut().find(|(x, _)| x == id).map(|(_, v)| v),
            OpenList::Indexed { order, by_id, .. } => {
                let at = by_id.get(id)?.front()?;
                order.get_mut(at).map(|(_, v)| v)
            }
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn len(&self) -> usize {
        match self {
            OpenList::Small(items) => items.len(),
            OpenList::Indexed { order, .. } => order.len(),
        }
    }

    /// The open ids, oldest first.
    pub fn ids(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.iter().map(|(id, _)| id)
    }

    /// The open items, oldest first.
    pub fn iter(&self) -> Iter<'_, V> {
        match self {
            OpenList::Small(items) => Iter::Small(items.iter()),
            OpenList::Indexed { order, .. } => Iter::Indexed(order.values()),
        }
    }
}

/// [`OpenList::iter`].
pub enum Iter<'a, V: Clone> {
    Small(std::slice::Iter<'a, (String, V)>),
    Indexed(imbl::ordmap::Values<'a, u64, (String, V), imbl::shared_ptr::DefaultSharedPtr>),
}

impl<'a, V: Clone> Iterator for Iter<'a, V> {
    type Item = (&'a str, &'a V);

    fn next(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next(),
            Iter::Indexed(i) => i.next(),
        }
        .map(|(id, v)| (id.as_str(), v))
    }
}

impl<V: Clone> DoubleEndedIterator for Iter<'_, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        match self {
            Iter::Small(i) => i.next_back(),
            Iter::Indexed(i) => i.next_back(),
        }
        .map(|(id, v)| (id.as_str(), v))
    }
}

impl OpenTracker {
    /// Records the effect of `event` (call after encoding it).
    pub fn observe(&mut self, event: &Event) {
        match &event.kind {
            EventKind::RunStarted { .. } => self.run = RunState::Running,
            EventKind::RunFinished { .. } | EventKind::RunError { .. } => {
                self.run = RunState::Ended;
                *self = OpenTracker {
                    run: RunState::Ended,
                    ..Default::default()
                };
            }
            EventKind::StepStarted { name } => self.steps.push(name.clone()),
            EventKind::StepFinished { .. } => {
                self.steps.pop();
            }
            EventKind::TextStart { message_id, .. } => self.texts.push(message_id.clone(), ()),
            EventKind::TextEnd { message_id } => {
                self.texts.remove(message_id);
            }
            EventKind::ReasoningPhaseStart { message_id } => {
                self.reasoning_phases.push(message_id.clone(), ())
            }
            EventKind::ReasoningPhaseEnd { message_id } => {
                self.reasoning_phases.remove(message_id);
            }
            EventKind::ReasoningStart { message_id } => self.reasoning.push(message_id.clone(), ()),
            EventKind::ReasoningEnd { message_id } => {
                self.reasoning.remove(message_id);
            }
            EventKind::ToolCallStart {
                tool_call_id,
                tool_name,
                ..
            } => self
                .tool_calls
                .push(tool_call_id.clone(), tool_name.clone()),
            EventKind::ToolCallEnd { tool_call_id } => {
                self.tool_calls.remove_all(tool_call_id);
            }
            EventKind::CollabStart { message_id, .. } => self.collabs.push(message_id.clone(), ()),
            EventKind::CollabEnd { message_id } => {
                self.collabs.remove(message_id);
            }
            _ => {}
        }
    }

    pub fn run_started(&self) -> bool {
        self.run != RunState::NotStarted
    }

    pub fn run_open(&self) -> bool {
        self.run == RunState::Running
    }

    pub fn text_open(&self, id: &str) -> bool {
        self.texts.contains(id)
    }

    pub fn open_texts(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.texts.ids()
    }

    pub fn reasoning_open(&self, id: &str) -> bool {
        self.reasoning.contains(id)
    }

    pub fn reasoning_phase_open(&self, id: &str) -> bool {
        self.reasoning_phases.contains(id)
    }

    pub fn collab_open(&self, id: &str) -> bool {
        self.collabs.contains(id)
    }

    pub fn tool_call_open(&self, id: &str) -> bool {
        self.tool_calls.contains(id)
    }

    pub fn tool_name(&self, id: &str) -> Option<&str> {
        self.tool_calls.get(id).map(String::as_str)
    }

    pub fn open_tool_calls(&self) -> impl DoubleEndedIterator<Item = &str> {
        self.tool_calls.ids()
    }

    /// Whether anything inside the run is still open.
    pub fn anything_open(&self) -> bool {
        !(self.texts.is_empty()
            && self.reasoning.is_empty()
            && self.reasoning_phases.is_empty()
            && self.tool_calls.is_empty()
            && self.collabs.is_empty()
            && self.steps.is_empty())
    }

    /// The events that close everything open inside the run, innermost kinds
    /// first (messages and calls before reasoning phases and steps). The run
    /// itself is left to the caller, which knows how its dialect ends one.
    pub fn closing_events(&self) -> Vec<Event> {
        let mut out = Vec::new();
        for id in self.texts.ids().rev() {
            out.push(Event::new(EventKind::text_end(id.to_string())));
        }
        for id in self.reasoning.ids().rev() {
            out.push(Event::new(EventKind::ReasoningEnd {
                message_id: id.to_string(),
            }));
        }
        for id in self.reasoning_phases.ids().rev() {
            out.push(Event::new(EventKind::ReasoningPhaseEnd {
                message_id: id.to_string(),
            }));
        }
        for id in self.tool_calls.ids().rev() {
            out.push(Event::new(EventKind::ToolCallEnd {
                tool_call_id: id.to_string(),
            }));
        }
        for id in self.collabs.ids().rev() {
            out.push(Event::new(EventKind::CollabEnd {
                message_id: id.to_string(),
            }));
        }
        for name in self.steps.iter().rev() {
            out.push(Event::new(EventKind::StepFinished { name: name.clone() }));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind) -> Event {
        Event::new(kind)
    }

    #[test]
    fn closes_what_is_open_and_nothing_else() {
        let mut t = OpenTracker::default();
        for e in [
            ev(EventKind::run_started()),
            ev(EventKind::TextStart {
                message_id: "a".into(),
                role: Default::default(),
                name: None,
            }),
            ev(EventKind::text_end("a")),
            ev(EventKind::TextStart {
                message_id: "b".into(),
                role: Default::default(),
                name: None,
            }),
            ev(EventKind::ToolCallStart {
                tool_call_id: "t".into(),
                tool_name: "x".into(),
                parent_message_id: None,
            }),
        ] {
            t.observe(&e);
        }
        assert!(t.run_open());
        assert_eq!(t.tool_name("t"), Some("x"));
        let kinds: Vec<_> = t.closing_events().into_iter().map(|e| e.kind).collect();
        assert_eq!(
            kinds,
            [
                EventKind::text_end("b"),
                EventKind::ToolCallEnd {
                    tool_call_id: "t".into()
                }
            ]
        );
        t.observe(&ev(EventKind::RunError {
            message: "x".into(),
            code: None,
        }));
        assert!(!t.anything_open());
        assert!(t.run_started() && !t.run_open());
    }

    /// The list against a plain vector, the old representation, through
    /// both of its forms: the same ids in the same order, the same answers.
    #[test]
    fn an_open_list_is_a_list_whether_indexed_or_not() {
        use proptest::prelude::*;
        #[derive(Debug, Clone)]
        enum Op {
            Push(u8, u8),
            Remove(u8),
            RemoveAll(u8),
            Take(u8),
            Bump(u8),
            TakeAll,
        }
        let op = prop_oneof![
            3 => (0u8..60, any::<u8>()).prop_map(|(i, v)| Op::Push(i, v)),
            1 => (0u8..60).prop_map(Op::Remove),
            1 => (0u8..60).prop_map(Op::RemoveAll),
            1 => (0u8..60).prop_map(Op::Take),
            1 => (0u8..60).prop_map(Op::Bump),
            1 => Just(Op::TakeAll),
        ];
        proptest!(ProptestConfig::with_cases(300), |(ops in proptest::collection::vec(op, 0..400))| {
            let mut list = OpenList::default();
            let mut model: Vec<(String, u8)> = Vec::new();
            for op in ops {
                match op {
                    Op::Push(i, v) => {
                        list.push(format!("id{i}"), v);
                        model.push((format!("id{i}"), v));
                    }
                    Op::Remove(i) => {
                        let id = format!("id{i}");
                        let at = model.iter().position(|(x, _)| *x == id);
                        if let Some(at) = at {
                            model.remove(at);
                        }
                        prop_assert_eq!(list.remove(&id), at.is_some());
                    }
                    Op::RemoveAll(i) => {
                        let id = format!("id{i}");
                        model.retain(|(x, _)| *x != id);
                        list.remove_all(&id);
                    }
                    Op::Take(i) => {
                        let id = format!("id{i}");
                        let at = model.iter().position(|(x, _)| *x == id);
                        let want = at.map(|at| model.remove(at).1);
                        prop_assert_eq!(list.take(&id), want);
                    }
                    Op::Bump(i) => {
                        // A change through `get_mut` lands on the oldest
                        // item of the id, and a copy taken before keeps the
                        // old value (the persistent form shares nodes).
                        let id = format!("id{i}");
                        let before = list.clone();
                        let was: Vec<(String, u8)> = before.iter().map(|(x, v)| (x.to_string(), *v)).collect();
                        let found = model.iter_mut().find(|(x, _)| *x == id);
                        let got = list.get_mut(&id);
                        prop_assert_eq!(got.is_some(), found.is_some());
                        if let (Some(g), Some((_, m))) = (got, found) {
                            *g = g.wrapping_add(1);
                            *m = m.wrapping_add(1);
                        }
                        let still: Vec<(String, u8)> = before.iter().map(|(x, v)| (x.to_string(), *v)).collect();
                        prop_assert_eq!(still, was);
                    }
                    Op::TakeAll => {
                        prop_assert_eq!(list.take_all(), std::mem::take(&mut model));
                    }
                }
                let items: Vec<(&str, u8)> = list.iter().map(|(x, v)| (x, *v)).collect();
                let want_items: Vec<(&str, u8)> = model.iter().map(|(x, v)| (x.as_str(), *v)).collect();
                prop_assert_eq!(items, want_items);
                prop_assert_eq!(list.len(), model.len());
                let ids: Vec<&str> = list.ids().collect();
                let want: Vec<&str> = model.iter().map(|(x, _)| x.as_str()).collect();
                prop_assert_eq!(&ids, &want);
                let back: Vec<&str> = list.ids().rev().collect();
                prop_assert_eq!(back, want.iter().rev().copied().collect::<Vec<_>>());
                prop_assert_eq!(list.is_empty(), model.is_empty());
                for i in [0u8, 7, 31, 59] {
                    let id = format!("id{i}");
                    let first = model.iter().find(|(x, _)| *x == id).map(|(_, v)| v);
                    prop_assert_eq!(list.get(&id), first);
                    prop_assert_eq!(list.contains(&id), first.is_some());
                }
            }
        });
    }

    #[test]
    fn thousands_of_open_items_are_indexed_and_shrink_back() {
        let mut list = OpenList::default();
        for i in 0..10_000 {
            list.push(format!("m{i}"), ());
        }
        assert!(matches!(list, OpenList::Indexed { .. }));
        assert!(list.contains("m9999") && !list.contains("m10000"));
        for i in 0..9_998 {
            assert!(list.remove(&format!("m{i}")));
        }
        assert!(matches!(list, OpenList::Small(_)));
        assert_eq!(list.ids().collect::<Vec<_>>(), ["m9998", "m9999"]);
    }

    #[test]
    fn an_emptied_list_lets_its_room_go() {
        let mut l: OpenList<()> = OpenList::default();
        l.push("a".into(), ());
        l.push("b".into(), ());
        assert!(l.take("a").is_some());
        assert!(matches!(&l, OpenList::Small(v) if v.capacity() > 0));
        assert!(l.take("b").is_some());
        assert!(matches!(&l, OpenList::Small(v) if v.capacity() == 0));
        l.push("c".into(), ());
        l.remove_all("c");
        assert!(matches!(&l, OpenList::Small(v) if v.capacity() == 0));
    }
}
