//! What the gateway does for a dialect beyond translating it: declared by
//! each adapter (its `POLICY`), read through the registry, so that a new
//! dialect brings its own and the gateway has no `Dialect::X` branches.

/// A dialect's needs around its streams.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Its clients send only their new messages: the gateway keeps each
    /// conversation's history (the answers assembled as they stream) and
    /// completes their requests with it.
    pub gateway_keeps_history: bool,
    /// As an upstream it keeps its own history: it is sent only what is new
    /// since its last answer.
    pub upstream_keeps_history: bool,
    /// How its clients come back to a run.
    pub resume: Resume,
    /// Its encoder can also write frames the dialect does not declare, for
    /// what it cannot say otherwise, when a route opts in
    /// (`extension_frames`); by default what it cannot say is dropped.
    pub extension_frames: bool,
    /// Its streams may also travel in AG-UI's binary transport
    /// (`application/vnd.ag-ui.event+proto`), as a client's and as an
    /// upstream's: its events are AG-UI's, or can be carried as AG-UI's.
    pub binary: bool,
    /// In the binary transport, its own events that AG-UI lacks travel as
    /// AG-UI `CUSTOM` events named `<prefix>:<TYPE>` (and its extra fields of
    /// AG-UI's events in `metadata.<prefix>`); `None`: it has no such events.
    pub binary_custom_prefix: Option<&'static str>,
    /// Its encoder stamps events with the clock when the source gave no
    /// time: a replay of a stream writes other times there.
    pub clock_timestamps: bool,
}

/// How a dialect's clients reconnect to a run (`GET {path}/{id}/stream`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resume {
    /// The client asks on every page load: only a running answer is
    /// resumed, replayed from its start (`Last-Event-ID` is not used).
    RunningFromStart,
    /// After `Last-Event-ID`; without one, a running run from its start.
    AfterOrFromStart,
    /// After `Last-Event-ID`; without one, a snapshot of the run so far
    /// (its input first, which is kept with the run for that), then the tail.
    AfterOrSnapshot,
}

impl Policy {
    /// Whether a run's input is kept for the snapshots its resumes start with.
    pub fn keeps_input(&self) -> bool {
        self.resume == Resume::AfterOrSnapshot
    }
}
