//! The dashboard's URLs (built in `plumbline_history::links`, which the
//! watcher's alert links share), the tool name a route carries, and
//! moments for people.

pub use plumbline_history::links::*;

/// A tool name taken from a route's path: extracting it undoes
/// [`tool_segment`], so no handler can forget to.
pub struct ToolName(pub String);

impl<'de> serde::Deserialize<'de> for ToolName {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ToolName, D::Error> {
        String::deserialize(d).map(|s| ToolName(tool_name(s)))
    }
}

pub use plumbline_history::time::utc;

/// A moment for people: how long ago (or how soon), with the exact UTC
/// time on hover and in `datetime`.
pub fn when(ms: i64) -> maud::Markup {
    let exact = utc(ms);
    maud::html! { time datetime=(exact) title=(exact) { (relative(ms, plumbline_history::time::now_ms())) } }
}

/// `ms` relative to `now`: "just now", "5 min ago", "3 h ago", "2 days
/// ago", "in 4 min"; past a month, the date.
pub fn relative(ms: i64, now: i64) -> String {
    let seconds = (now - ms) / 1000;
    let ahead = seconds < 0;
    let s = seconds.unsigned_abs();
    let amount = match s {
        0..=44 => return "just now".to_owned(),
        45..=5_399 => format!("{} min", (s + 30) / 60),
        5_400..=129_599 => format!("{} h", (s + 1_800) / 3_600),
        129_600..=2_591_999 => format!("{} days", (s + 43_200) / 86_400),
        _ => return utc(ms)[..10].to_owned(),
    };
    if ahead {
        format!("in {amount}")
    } else {
        format!("{amount} ago")
    }
}

#[cfg(test)]
mod when_tests {
    use super::relative;

    #[test]
    fn moments_read_as_people_say_them() {
        let now = 1_780_000_000_000;
        let ago = |s: i64| relative(now - s * 1000, now);
        assert_eq!(ago(10), "just now");
        assert_eq!(ago(90), "2 min ago");
        assert_eq!(ago(3 * 3600), "3 h ago");
        assert_eq!(ago(2 * 86_400), "2 days ago");
        assert_eq!(ago(-300), "in 5 min");
        assert_eq!(ago(90 * 86_400), "2026-02-27");
    }
}
