//! What is wrong with a config file, each problem with its line and column,
//! quoted values clipped.

use std::fmt;

/// One problem in the file, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    pub line: usize,
    pub column: usize,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.column, self.message)
    }
}

/// All problems found in one file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors {
    pub file: String,
    pub errors: Vec<ConfigError>,
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{}:{e}", self.file)?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

/// Why a route or page at `path` could never be asked for, if so: clients
/// resolve `.` and `..` segments before they send a path, and the query and
/// fragment are not part of it.
pub(super) fn unreachable_path(path: &str) -> Option<&'static str> {
    if path.split('/').any(|seg| seg == "." || seg == "..") {
        Some("has a `.` or `..` segment, which clients resolve away: no request can name it")
    } else if path.contains(['?', '#']) || path.chars().any(char::is_whitespace) {
        Some("is not a plain path (no `?`, `#` or spaces)")
    } else {
        None
    }
}

/// The most of one quoted value a message repeats.
pub(super) const MAX_QUOTED: usize = 200;

/// `message` with every quoted value (between backticks or double quotes)
/// longer than [`MAX_QUOTED`] bytes cut, saying how long it was, and the
/// whole at most a few times that: a 10 MB value in the file is not echoed
/// by `check` or into the log on reload. Every config error goes through it.
pub(super) fn clip_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(4 * MAX_QUOTED));
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let (before, from) = rest.split_at(open);
        out.push_str(before);
        let mut chars = from.chars();
        let q = chars.next().unwrap_or('`');
        let inner = chars.as_str();
        let Some((value, after)) = inner.split_once(q) else {
            rest = from;
            break;
        };
        out.push(q);
        out.push_str(cut(value, MAX_QUOTED));
        if value.len() > MAX_QUOTED {
            out.push_str(&format!("... ({} bytes)", value.len()));
        }
        out.push(q);
        rest = after;
    }
    // What is left: unquoted, or an unclosed quote.
    let room = (4 * MAX_QUOTED).saturating_sub(out.len()).max(MAX_QUOTED);
    out.push_str(cut(rest, room));
    if rest.len() > room {
        out.push_str(&format!("... ({} bytes)", rest.len()));
    }
    out
}

/// At most `max` bytes of `s`, cut at a character boundary.
pub(super) fn cut(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s.get(..end).unwrap_or_default()
}

pub(super) fn position(src: &str, offset: usize) -> (usize, usize) {
    let before = src.get(..offset).unwrap_or(src);
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.len(), |i| before.len() - i - 1)
        + 1;
    (line, column)
}
