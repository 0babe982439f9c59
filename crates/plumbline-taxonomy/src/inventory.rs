//! The other tools the model is offered beside the one being graded.
//!
//! A pair of tool versions alone cannot say whether a word names a tool.
//! taxonomy-v2 may use the names of the other tools in the same listing
//! (*siblings*: a server describing how its own tools work together is
//! its own business) and on the other observed servers (*foreign*: a tool
//! that talks about another server's tools is shadowing them). Without an
//! inventory, v2 decides by form alone (`docs/taxonomy-v2.md`, 2.7).
//! taxonomy-v1 ignores the inventory.
//!
//! taxonomy-v3 also reads the descriptions of the inventory's tools, where
//! it was given tool objects and not only names: an added tool that repeats
//! another tool's description shadows it (R16).

use std::collections::BTreeSet;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Inventory {
    siblings: BTreeSet<String>,
    foreign: BTreeSet<String>,
    /// The tools given as objects: their names (also in the sets above)
    /// and descriptions, in the order given.
    tools: Vec<InventoryTool>,
}

/// A tool of the inventory given as an object (taxonomy-v3, R16).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InventoryTool {
    pub name: String,
    /// The string `description`, if the object has one.
    pub description: Option<String>,
    /// Another server's tool, not a sibling.
    pub foreign: bool,
}

impl Inventory {
    /// No other tools known.
    pub fn empty() -> Inventory {
        Inventory::default()
    }

    /// The tool names of the same listing.
    pub fn with_siblings<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.siblings.extend(names.into_iter().map(Into::into));
        self
    }

    /// The tool names of other servers.
    pub fn with_foreign<I: IntoIterator<Item = S>, S: Into<String>>(mut self, names: I) -> Self {
        self.foreign.extend(names.into_iter().map(Into::into));
        self
    }

    /// A tool of the same listing given as an object: its name counts as
    /// a sibling's, and taxonomy-v3 reads its description.
    pub fn with_sibling_tool(mut self, name: &str, description: Option<&str>) -> Self {
        self.siblings.insert(name.to_owned());
        self.tools.push(InventoryTool {
            name: name.to_owned(),
            description: description.map(str::to_owned),
            foreign: false,
        });
        self
    }

    /// The tools of the same listing, as (name, definition): each a
    /// sibling, with its string `description` (taxonomy-v3 R16).
    pub fn with_sibling_definitions<'v, I>(self, tools: I) -> Self
    where
        I: IntoIterator<Item = (&'v str, &'v crate::json::Value)>,
    {
        tools
            .into_iter()
            .fold(self, |inventory, (name, definition)| {
                let description = definition
                    .get("description")
                    .and_then(crate::json::Value::as_str);
                inventory.with_sibling_tool(name, description)
            })
    }

    /// A tool of another server given as an object.
    pub fn with_foreign_tool(mut self, name: &str, description: Option<&str>) -> Self {
        self.foreign.insert(name.to_owned());
        self.tools.push(InventoryTool {
            name: name.to_owned(),
            description: description.map(str::to_owned),
            foreign: true,
        });
        self
    }

    /// The tools given as objects, siblings and foreign, in the order given.
    pub fn tools(&self) -> &[InventoryTool] {
        &self.tools
    }

    pub fn has_siblings(&self) -> bool {
        !self.siblings.is_empty()
    }

    pub fn is_sibling(&self, name: &str) -> bool {
        self.siblings.contains(name)
    }

    /// Whether a sibling's name ends with `_word`, `-word` or `.word`.
    pub fn has_sibling_ending_with(&self, word: &str) -> bool {
        !word.is_empty()
            && self.siblings.iter().any(|s| {
                s.len() > word.len()
                    && s.ends_with(word)
                    && matches!(s.as_bytes()[s.len() - word.len() - 1], b'_' | b'-' | b'.')
            })
    }

    /// Whether a sibling's name starts with `prefix` (a `prefix*` pattern).
    pub fn has_sibling_starting_with(&self, prefix: &str) -> bool {
        !prefix.is_empty() && self.siblings.iter().any(|s| s.starts_with(prefix))
    }

    /// A foreign name that is not also a sibling's.
    pub fn is_foreign(&self, name: &str) -> bool {
        self.foreign.contains(name) && !self.siblings.contains(name)
    }

    pub fn foreign(&self) -> impl Iterator<Item = &str> {
        self.foreign.iter().map(String::as_str)
    }

    pub fn is_empty(&self) -> bool {
        self.siblings.is_empty() && self.foreign.is_empty() && self.tools.is_empty()
    }
}
