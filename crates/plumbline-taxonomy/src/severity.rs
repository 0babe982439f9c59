//! Severities and rule identifiers (spec 1.2–1.3).

use std::fmt;
use std::str::FromStr;

/// How much a change matters, in the order of spec 1.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Severity {
    #[default]
    None,
    Low,
    Medium,
    High,
    Critical,
}

impl Severity {
    pub const ALL: [Severity; 5] = [
        Severity::None,
        Severity::Low,
        Severity::Medium,
        Severity::High,
        Severity::Critical,
    ];

    /// The spelling of spec 1.2 and C21: upper case.
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::None => "NONE",
            Severity::Low => "LOW",
            Severity::Medium => "MEDIUM",
            Severity::High => "HIGH",
            Severity::Critical => "CRITICAL",
        }
    }

    /// The rank of spec 1.3 (NONE = 0 … CRITICAL = 4).
    pub fn rank(self) -> u8 {
        self as u8
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown severity name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown severity {0:?}: expected one of none, low, medium, high, critical")]
pub struct UnknownSeverity(pub String);

impl FromStr for Severity {
    type Err = UnknownSeverity;
    /// Accepts any letter case: `high`, `HIGH`, `High`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Severity::ALL
            .into_iter()
            .find(|sev| sev.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| UnknownSeverity(s.to_owned()))
    }
}

/// Reads what [`FromStr`] accepts, so a configuration file's typo is an
/// error at load naming the value.
impl<'de> serde::Deserialize<'de> for Severity {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for Severity {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// A rule of taxonomy-v1 (R01–R09), taxonomy-v2 (R01–R13) or taxonomy-v3
/// (R01–R20). Codes are
/// stable and user-facing: changing what a rule flags is a new taxonomy
/// version (spec 7), and a code keeps its severity in every version.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RuleId {
    R01,
    R02,
    R03,
    R04,
    R05,
    R06,
    R07,
    R08,
    R09,
    R10,
    R11,
    R12,
    R13,
    R14,
    R15,
    R16,
    R17,
    R18,
    R19,
    R20,
}

impl RuleId {
    /// Every rule of every taxonomy; [`crate::Taxonomy::rules`] says which
    /// belong to one.
    pub const ALL: [RuleId; 20] = [
        RuleId::R01,
        RuleId::R02,
        RuleId::R03,
        RuleId::R04,
        RuleId::R05,
        RuleId::R06,
        RuleId::R07,
        RuleId::R08,
        RuleId::R09,
        RuleId::R10,
        RuleId::R11,
        RuleId::R12,
        RuleId::R13,
        RuleId::R14,
        RuleId::R15,
        RuleId::R16,
        RuleId::R17,
        RuleId::R18,
        RuleId::R19,
        RuleId::R20,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RuleId::R01 => "R01",
            RuleId::R02 => "R02",
            RuleId::R03 => "R03",
            RuleId::R04 => "R04",
            RuleId::R05 => "R05",
            RuleId::R06 => "R06",
            RuleId::R07 => "R07",
            RuleId::R08 => "R08",
            RuleId::R09 => "R09",
            RuleId::R10 => "R10",
            RuleId::R11 => "R11",
            RuleId::R12 => "R12",
            RuleId::R13 => "R13",
            RuleId::R14 => "R14",
            RuleId::R15 => "R15",
            RuleId::R16 => "R16",
            RuleId::R17 => "R17",
            RuleId::R18 => "R18",
            RuleId::R19 => "R19",
            RuleId::R20 => "R20",
        }
    }

    /// The rule's severity (spec 4).
    pub fn severity(self) -> Severity {
        match self {
            RuleId::R01 | RuleId::R02 | RuleId::R10 | RuleId::R13 | RuleId::R19 => {
                Severity::Critical
            }
            RuleId::R03
            | RuleId::R04
            | RuleId::R05
            | RuleId::R11
            | RuleId::R12
            | RuleId::R14
            | RuleId::R15
            | RuleId::R16
            | RuleId::R17
            | RuleId::R18
            | RuleId::R20 => Severity::High,
            RuleId::R06 | RuleId::R07 => Severity::Medium,
            RuleId::R08 => Severity::Low,
            RuleId::R09 => Severity::None,
        }
    }

    /// The rule's title (spec 4).
    pub fn title(self) -> &'static str {
        match self {
            RuleId::R01 => "Invisible payload introduced",
            RuleId::R02 => "New imperative instruction to the model",
            RuleId::R03 => "New URL, domain, IP, or absolute path",
            RuleId::R04 => "New required inputSchema property",
            RuleId::R05 => "Cross-server / cross-tool reference",
            RuleId::R06 => "New optional inputSchema property",
            RuleId::R07 => "Annotation change toward greater capability",
            RuleId::R08 => "Large description rewrite without higher signals",
            RuleId::R09 => "Cosmetic-only change",
            RuleId::R10 => "Instruction about another tool",
            RuleId::R11 => "Self-promotion aimed at the model's choice",
            RuleId::R12 => "Claim to change the user's inputs",
            RuleId::R13 => "Concealment from the user",
            RuleId::R14 => "Wording aimed at the model",
            RuleId::R15 => "Required call order",
            RuleId::R16 => "Duplicate of another tool",
            RuleId::R17 => "Authority claim or silent redirection",
            RuleId::R18 => "Sensitive capability described",
            RuleId::R19 => "Instruction with a second signal",
            RuleId::R20 => "Text in a field MCP does not define",
        }
    }

    /// The rule's documentation: what it detects, why, when it fires and
    /// when it does not, with an example. `plumbline explain` prints it.
    pub fn documentation(self) -> &'static str {
        crate::rules::documentation(self)
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown rule code.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown rule {0:?}: taxonomy-v1 has R01 to R09, taxonomy-v2 R01 to R13, taxonomy-v3 R01 to R20")]
pub struct UnknownRule(pub String);

impl FromStr for RuleId {
    type Err = UnknownRule;
    /// Accepts `R03`, `r03` and `3`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let digits = t.strip_prefix(['R', 'r']).unwrap_or(t);
        match digits.parse::<u8>() {
            Ok(n @ 1..=20) if digits.len() <= 2 => Ok(RuleId::ALL[usize::from(n - 1)]),
            _ => Err(UnknownRule(s.to_owned())),
        }
    }
}

impl<'de> serde::Deserialize<'de> for RuleId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for RuleId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn severities_order_as_spec_1_3() {
        assert!(Severity::None < Severity::Low && Severity::High < Severity::Critical);
        assert_eq!(Severity::Critical.rank(), 4);
        assert_eq!("high".parse(), Ok(Severity::High));
        assert!("severe".parse::<Severity>().is_err());
    }

    #[test]
    fn rule_codes_parse() {
        assert_eq!("R03".parse(), Ok(RuleId::R03));
        assert_eq!("r9".parse(), Ok(RuleId::R09));
        assert_eq!("3".parse(), Ok(RuleId::R03));
        assert_eq!("R13".parse(), Ok(RuleId::R13));
        assert_eq!("R20".parse(), Ok(RuleId::R20));
        assert!("R21".parse::<RuleId>().is_err());
        assert!("R00".parse::<RuleId>().is_err());
    }
}

#[cfg(test)]
mod serde_tests {
    use super::*;

    #[test]
    fn severities_and_rules_read_back_what_they_write() {
        for sev in Severity::ALL {
            let json = serde_json::to_string(&sev).unwrap();
            assert_eq!(serde_json::from_str::<Severity>(&json).unwrap(), sev);
        }
        assert_eq!(
            serde_json::from_str::<Severity>("\"high\"").unwrap(),
            Severity::High
        );
        let e = serde_json::from_str::<Severity>("\"hihg\"").unwrap_err();
        assert!(e.to_string().contains("unknown severity \"hihg\""), "{e}");
        let rule: RuleId = serde_json::from_str("\"R02\"").unwrap();
        assert_eq!(serde_json::to_string(&rule).unwrap(), "\"R02\"");
        assert!(serde_json::from_str::<RuleId>("\"R99\"").is_err());
    }
}
