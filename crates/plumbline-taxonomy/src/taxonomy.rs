//! Which taxonomy grades: `taxonomy-v1` (the normative seed, exact) or
//! `taxonomy-v2` (`docs/taxonomy-v2.md`) or `taxonomy-v3`
//! (`docs/taxonomy-v3.md`). A grade is only meaningful with
//! the taxonomy that produced it, so every report and every stored grade
//! names it.

use std::fmt;
use std::str::FromStr;

use crate::severity::RuleId;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Taxonomy {
    /// `taxonomy-v1`: rules R01–R09, exactly as specified.
    #[default]
    V1,
    /// `taxonomy-v2`: R01–R09 revised where v1 raised false alarms, plus
    /// R10–R13 for the attack families v1 misses.
    V2,
    /// `taxonomy-v3`: v2 with CRITICAL reserved for certain signals and
    /// R14–R20 for the attack families v2 lets through.
    V3,
}

impl Taxonomy {
    pub const ALL: [Taxonomy; 3] = [Taxonomy::V1, Taxonomy::V2, Taxonomy::V3];

    /// The full name: `taxonomy-v1`, `taxonomy-v2`.
    pub fn id(self) -> &'static str {
        match self {
            Taxonomy::V1 => "taxonomy-v1",
            Taxonomy::V2 => "taxonomy-v2",
            Taxonomy::V3 => "taxonomy-v3",
        }
    }

    /// The short name used by `--taxonomy` and `plumbline.toml`.
    pub fn short(self) -> &'static str {
        match self {
            Taxonomy::V1 => "v1",
            Taxonomy::V2 => "v2",
            Taxonomy::V3 => "v3",
        }
    }

    /// The rules of this taxonomy, in order.
    pub fn rules(self) -> &'static [RuleId] {
        match self {
            Taxonomy::V1 => &RuleId::ALL[..9],
            Taxonomy::V2 => &RuleId::ALL[..13],
            Taxonomy::V3 => &RuleId::ALL,
        }
    }

    /// Whether this taxonomy revises v1's rules as taxonomy-v2 does (v2 and
    /// every later version, unless it says otherwise).
    pub fn since_v2(self) -> bool {
        self >= Taxonomy::V2
    }

    /// The revision of this taxonomy's rules and lists. v1 and v2 are
    /// final; taxonomy-v3 is a draft (`docs/taxonomy-v3.md`, Status) whose
    /// every change to a rule or a list bumps this, so that grades stored
    /// under an earlier draft are graded again, and marked so, rather than
    /// served as if current.
    pub fn revision(self) -> Option<&'static str> {
        match self {
            Taxonomy::V1 | Taxonomy::V2 => None,
            Taxonomy::V3 => Some(V3_REVISION),
        }
    }

    pub fn has(self, rule: RuleId) -> bool {
        self.rules().contains(&rule)
    }
}

/// taxonomy-v3's draft revision: bump it with every change to its rules
/// or lists (a unit test pins the lists to it).
pub const V3_REVISION: &str = "draft 7";

impl fmt::Display for Taxonomy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// An unknown taxonomy name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown taxonomy {0:?}: expected v1, v2 or v3")]
pub struct UnknownTaxonomy(pub String);

impl FromStr for Taxonomy {
    type Err = UnknownTaxonomy;
    /// Accepts `v1`, `taxonomy-v1` and `1` (any case), and the same for v2.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim().to_ascii_lowercase();
        let t = t.strip_prefix("taxonomy-").unwrap_or(&t);
        match t.strip_prefix('v').unwrap_or(t) {
            "1" => Ok(Taxonomy::V1),
            "2" => Ok(Taxonomy::V2),
            "3" => Ok(Taxonomy::V3),
            _ => Err(UnknownTaxonomy(s.to_owned())),
        }
    }
}

impl serde::Serialize for Taxonomy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.id())
    }
}

impl<'de> serde::Deserialize<'de> for Taxonomy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// FNV-1a over the v3 lists: a fixed function, so the figure below
    /// changes only when a list does.
    fn fnv1a(texts: &[&str]) -> u64 {
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for t in texts {
            for b in t.bytes().chain([0]) {
                h ^= u64::from(b);
                h = h.wrapping_mul(0x0100_0000_01b3);
            }
        }
        h
    }

    #[test]
    fn a_change_to_a_v3_list_comes_with_a_new_revision() {
        use crate::lexicon::*;
        let lists = [
            IMPERATIVES_V3,
            DIRECTIVES_V3,
            PROMOTION_V3,
            OVERRIDES_V3,
            CONCEALMENT_V3,
            CUES_V3,
            SEQUENCING_V3,
            AUTHORITY_V3,
            SENSITIVE_V3,
            CHANNELS_V3,
            crate::constructions::CONSTRUCTIONS_V3,
        ];
        // If this fails, a v3 list changed: bump V3_REVISION (stored v3
        // grades are then graded again) and record the figure here.
        assert_eq!(
            (V3_REVISION, format!("{:016x}", fnv1a(&lists))),
            ("draft 7", "87d3290038c8a6a2".to_owned())
        );
    }

    #[test]
    fn names_parse_both_ways() {
        for t in Taxonomy::ALL {
            assert_eq!(t.id().parse(), Ok(t));
            assert_eq!(t.short().parse(), Ok(t));
        }
        assert_eq!("V2".parse(), Ok(Taxonomy::V2));
        assert_eq!("v3".parse(), Ok(Taxonomy::V3));
        assert!("v4".parse::<Taxonomy>().is_err());
        assert_eq!(Taxonomy::V1.rules().last(), Some(&RuleId::R09));
        assert!(Taxonomy::V2.has(RuleId::R13) && !Taxonomy::V1.has(RuleId::R10));
    }
}
