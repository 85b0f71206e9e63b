//! The dialect names, shared by config, CLI and adapters.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Dialect {
    #[serde(rename = "ag-ui")]
    AgUi,
    #[serde(rename = "hai")]
    Hai,
    #[serde(rename = "vercel")]
    Vercel,
    #[serde(rename = "agkit")]
    AgKit,
    #[serde(rename = "a2a")]
    A2a,
}

impl Dialect {
    pub const ALL: [Dialect; 5] = [
        Dialect::AgUi,
        Dialect::Hai,
        Dialect::Vercel,
        Dialect::AgKit,
        Dialect::A2a,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Dialect::AgUi => "ag-ui",
            Dialect::Hai => "hai",
            Dialect::Vercel => "vercel",
            Dialect::AgKit => "agkit",
            Dialect::A2a => "a2a",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown dialect `{0}` (expected one of: ag-ui, hai, vercel, agkit, a2a)")]
pub struct UnknownDialect(pub String);

impl FromStr for Dialect {
    type Err = UnknownDialect;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "ag-ui" | "agui" => Ok(Dialect::AgUi),
            "hai" => Ok(Dialect::Hai),
            "vercel" => Ok(Dialect::Vercel),
            "agkit" | "ag-kit" => Ok(Dialect::AgKit),
            "a2a" => Ok(Dialect::A2a),
            other => Err(UnknownDialect(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for d in Dialect::ALL {
            assert_eq!(d.as_str().parse::<Dialect>().unwrap(), d);
        }
        assert!("grpc".parse::<Dialect>().is_err());
    }
}
