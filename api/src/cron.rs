//! AdvancedCronJob schedules as upstream reads them: robfig/cron v3's `ParseStandard` (five
//! fields — minute, hour, day of month, month, day of week —, the descriptors `@yearly`,
//! `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly` and `@every <duration>`,
//! and a `TZ=`/`CRON_TZ=` prefix), with upstream's `formatSchedule` for `spec.timeZone`.
//!
//! The time arithmetic (next point in a zone, daylight-saving gaps and folds) is `croner`'s over
//! `jiff`'s zones; robfig's syntax is converted to croner's faithfully: each field is expanded to
//! the exact set of values robfig accepts (so croner never sees `L`, `W`, `#`, `7` or the other
//! forms robfig refuses), and a field carrying robfig's "star" flag (`*`, `?`, `*/1`) is passed
//! as `*`, which gives croner robfig's day rule (day of month AND day of week when either is a
//! star, OR otherwise). Zones come from jiff's bundled tz database (`tzdb-bundle-always` in
//! Cargo.toml: the manager image has no `/usr/share/zoneinfo`).

use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, ToSpan, Zoned};

/// A schedule that cannot be parsed, in robfig's words where it has them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    #[error("empty spec string")]
    Empty,
    #[error("provided bad location {0}: unknown time zone {0}")]
    BadLocation(String),
    #[error("a {0} prefix must be followed by a space and the schedule")]
    PrefixWithoutSchedule(&'static str),
    #[error("unrecognized descriptor: {0}")]
    UnknownDescriptor(String),
    #[error("failed to parse duration {0}: invalid duration")]
    BadDuration(String),
    #[error("expected exactly 5 fields, found {0}: {1}")]
    FieldCount(usize, String),
    #[error("{0}")]
    Field(String),
}

/// A parsed schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    kind: Kind,
    zone: TimeZone,
}

#[derive(Debug, Clone)]
enum Kind {
    /// Five fields (or a descriptor that stands for them).
    Spec(Box<croner::Cron>),
    /// `@every`: robfig's `ConstantDelaySchedule`, whole seconds, at least one.
    Every(i64),
    /// A field with no value at all (robfig accepts `,`): no point ever comes.
    Never,
}

/// Bounds and names of one field (robfig's `bounds`).
struct Bounds {
    min: u32,
    max: u32,
    names: &'static [(&'static str, u32)],
}

const MINUTES: Bounds = Bounds {
    min: 0,
    max: 59,
    names: &[],
};
const HOURS: Bounds = Bounds {
    min: 0,
    max: 23,
    names: &[],
};
const DOM: Bounds = Bounds {
    min: 1,
    max: 31,
    names: &[],
};
const MONTHS: Bounds = Bounds {
    min: 1,
    max: 12,
    names: &[
        ("jan", 1),
        ("feb", 2),
        ("mar", 3),
        ("apr", 4),
        ("may", 5),
        ("jun", 6),
        ("jul", 7),
        ("aug", 8),
        ("sep", 9),
        ("oct", 10),
        ("nov", 11),
        ("dec", 12),
    ],
};
const DOW: Bounds = Bounds {
    min: 0,
    max: 6,
    names: &[
        ("sun", 0),
        ("mon", 1),
        ("tue", 2),
        ("wed", 3),
        ("thu", 4),
        ("fri", 5),
        ("sat", 6),
    ],
};

/// One parsed field: its values and robfig's star flag.
struct Field {
    values: u64,
    star: bool,
}

/// The schedule of an AdvancedCronJob (upstream `formatSchedule`, then `cron.ParseStandard`):
/// a schedule containing "TZ" is read as written; otherwise a `timeZone` that loads is put in
/// front as `TZ=`; otherwise the manager's zone applies.
pub fn for_cron_job(schedule: &str, time_zone: Option<&str>) -> Result<Schedule, ScheduleError> {
    if !schedule.contains("TZ")
        && let Some(tz) = time_zone
        && load_location(tz).is_ok()
    {
        return parse_standard(&format!("TZ={tz} {schedule}"));
    }
    parse_standard(schedule)
}

/// robfig/cron v3 `ParseStandard`.
pub fn parse_standard(spec: &str) -> Result<Schedule, ScheduleError> {
    if spec.is_empty() {
        return Err(ScheduleError::Empty);
    }
    let mut zone = TimeZone::system();
    let mut spec = spec;
    for prefix in ["TZ=", "CRON_TZ="] {
        if let Some(rest) = spec.strip_prefix(prefix) {
            let Some((name, tail)) = rest.split_once(' ') else {
                return Err(ScheduleError::PrefixWithoutSchedule(prefix));
            };
            zone = load_location(name)?;
            spec = tail.trim();
            break;
        }
    }
    if spec.starts_with('@') {
        return descriptor(spec, zone);
    }
    let fields: Vec<&str> = spec.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(ScheduleError::FieldCount(
            fields.len(),
            format!("[{}]", fields.join(" ")),
        ));
    }
    let parsed = [
        field(fields[0], &MINUTES)?,
        field(fields[1], &HOURS)?,
        field(fields[2], &DOM)?,
        field(fields[3], &MONTHS)?,
        field(fields[4], &DOW)?,
    ];
    if parsed.iter().any(|f| f.values == 0) {
        return Ok(Schedule {
            kind: Kind::Never,
            zone,
        });
    }
    let pattern = format!(
        "0 {} {} {} {} {}",
        croner_field(&parsed[0]),
        croner_field(&parsed[1]),
        croner_field(&parsed[2]),
        croner_field(&parsed[3]),
        croner_field(&parsed[4]),
    );
    let cron = croner::parser::CronParser::builder()
        .seconds(croner::parser::Seconds::Required)
        .build()
        .parse(&pattern)
        .map_err(|e| ScheduleError::Field(format!("{spec}: {e}")))?;
    Ok(Schedule {
        kind: Kind::Spec(Box::new(cron)),
        zone,
    })
}

/// Go's `time.LoadLocation`: "" and "UTC" are UTC, "Local" the process's zone, anything else
/// an IANA name spelled exactly as the database spells it.
pub fn load_location(name: &str) -> Result<TimeZone, ScheduleError> {
    match name {
        "" | "UTC" => return Ok(TimeZone::UTC),
        "Local" => return Ok(TimeZone::system()),
        _ => {}
    }
    let bad = || ScheduleError::BadLocation(name.to_owned());
    let tz = jiff::tz::db().get(name).map_err(|_| bad())?;
    // jiff looks names up ignoring case; Go (on Linux) does not.
    if tz.iana_name() != Some(name) {
        return Err(bad());
    }
    Ok(tz)
}

impl Schedule {
    /// The first schedule point strictly after `after` (robfig's `Next`), in the schedule's
    /// zone; `None` when there is none within five years (robfig's zero time).
    pub fn next(&self, after: Timestamp) -> Option<Zoned> {
        let floor = Timestamp::from_second(after.as_second()).ok()?;
        let floor = if floor > after {
            floor.checked_sub(SignedDuration::from_secs(1)).ok()?
        } else {
            floor
        };
        match &self.kind {
            Kind::Never => None,
            Kind::Every(secs) => floor
                .checked_add(SignedDuration::from_secs(*secs))
                .ok()
                .map(|t| t.to_zoned(TimeZone::UTC)),
            Kind::Spec(cron) => {
                let start = floor.to_zoned(self.zone.clone());
                let limit = start.checked_add(5.years()).ok()?;
                let next = cron.find_next_occurrence(&start, false).ok()?;
                (next <= limit).then_some(next)
            }
        }
    }
}

/// Formats a schedule point as Go's `time.RFC3339` does (`Z` for a zero offset).
pub fn format_rfc3339(t: &Zoned) -> String {
    let s = t.strftime("%Y-%m-%dT%H:%M:%S%:z").to_string();
    match s.strip_suffix("+00:00") {
        Some(head) => format!("{head}Z"),
        None => s,
    }
}

/// Parses an RFC 3339 time as Go's `time.Parse(time.RFC3339, …)` reads it.
pub fn parse_rfc3339(s: &str) -> Option<Timestamp> {
    s.parse::<Timestamp>().ok()
}

fn descriptor(spec: &str, zone: TimeZone) -> Result<Schedule, ScheduleError> {
    let five = match spec {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => {
            let Some(d) = spec.strip_prefix("@every ") else {
                return Err(ScheduleError::UnknownDescriptor(spec.to_owned()));
            };
            let nanos =
                go_duration_nanos(d).ok_or_else(|| ScheduleError::BadDuration(spec.to_owned()))?;
            // robfig's `Every`: below a second is a second; the rest is cut to whole seconds.
            let secs = i64::try_from(nanos / 1_000_000_000)
                .unwrap_or(i64::MAX)
                .max(1);
            return Ok(Schedule {
                kind: Kind::Every(secs),
                zone,
            });
        }
    };
    let mut s = parse_standard(five)?;
    s.zone = zone;
    Ok(s)
}

/// Go's `time.ParseDuration`, in nanoseconds: `[-+]` then one or more `<decimal><unit>` with the
/// units ns, us, µs, μs, ms, s, m, h; `0` alone is zero.
fn go_duration_nanos(s: &str) -> Option<i128> {
    let (neg, mut rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    if rest == "0" {
        return Some(0);
    }
    if rest.is_empty() {
        return None;
    }
    let mut total: i128 = 0;
    while !rest.is_empty() {
        let num_end = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let num = &rest[..num_end];
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
            return None;
        }
        rest = &rest[num_end..];
        let unit_end = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale: i128 = match &rest[..unit_end] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return None,
        };
        rest = &rest[unit_end..];
        let whole: i128 = if int.is_empty() { 0 } else { int.parse().ok()? };
        let mut part = whole.checked_mul(scale)?;
        let mut unit = scale;
        for d in frac.bytes() {
            unit /= 10;
            part += i128::from(d - b'0') * unit;
        }
        total = total.checked_add(part)?;
        if total > i128::from(i64::MAX) {
            return None;
        }
    }
    Some(if neg { -total } else { total })
}

/// robfig `getField`: comma-separated ranges (empty items dropped, as `strings.FieldsFunc`).
fn field(text: &str, b: &Bounds) -> Result<Field, ScheduleError> {
    let mut f = Field {
        values: 0,
        star: false,
    };
    for expr in text.split(',').filter(|e| !e.is_empty()) {
        let (bits, star) = range(expr, b)?;
        f.values |= bits;
        f.star |= star;
    }
    Ok(f)
}

/// robfig `getRange`: `*`, `?`, `N`, `N-M`, each with an optional `/step`; `N/step` means
/// `N-max/step`; a step above 1 drops the star flag.
fn range(expr: &str, b: &Bounds) -> Result<(u64, bool), ScheduleError> {
    let err = |m: String| ScheduleError::Field(m);
    let parts: Vec<&str> = expr.split('/').collect();
    let low_high: Vec<&str> = parts[0].split('-').collect();
    let single = low_high.len() == 1;
    let (start, mut end, mut star) = if low_high[0] == "*" || low_high[0] == "?" {
        (b.min, b.max, true)
    } else {
        let start = int_or_name(low_high[0], b)?;
        let end = match low_high.len() {
            1 => start,
            2 => int_or_name(low_high[1], b)?,
            _ => return Err(err(format!("too many hyphens: {expr}"))),
        };
        (start, end, false)
    };
    let step = match parts.len() {
        1 => 1,
        2 => {
            let step = number(parts[1])?;
            if single {
                end = b.max;
            }
            if step > 1 {
                star = false;
            }
            step
        }
        _ => return Err(err(format!("too many slashes: {expr}"))),
    };
    if start < b.min {
        return Err(err(format!(
            "beginning of range ({start}) below minimum ({}): {expr}",
            b.min
        )));
    }
    if end > b.max {
        return Err(err(format!(
            "end of range ({end}) above maximum ({}): {expr}",
            b.max
        )));
    }
    if start > end {
        return Err(err(format!(
            "beginning of range ({start}) beyond end of range ({end}): {expr}"
        )));
    }
    if step == 0 {
        return Err(err(format!(
            "step of range should be a positive number: {expr}"
        )));
    }
    let mut bits = 0u64;
    let mut v = start;
    while v <= end {
        bits |= 1u64 << v;
        v += step;
    }
    Ok((bits, star))
}

fn int_or_name(s: &str, b: &Bounds) -> Result<u32, ScheduleError> {
    let lower = s.to_ascii_lowercase();
    if let Some((_, v)) = b.names.iter().find(|(n, _)| *n == lower) {
        return Ok(*v);
    }
    number(s)
}

/// Go's `strconv.Atoi` for a count: an optional sign, digits; negative refused.
fn number(s: &str) -> Result<u32, ScheduleError> {
    let n: i64 = s
        .parse()
        .map_err(|_| ScheduleError::Field(format!("failed to parse int from {s}")))?;
    if n < 0 {
        return Err(ScheduleError::Field(format!(
            "negative number ({n}) not allowed: {s}"
        )));
    }
    // Anything above 63 is out of every field's range; the bound check names it.
    Ok(u32::try_from(n.min(1000)).unwrap_or(1000))
}

fn croner_field(f: &Field) -> String {
    if f.star {
        return "*".to_owned();
    }
    (0..64)
        .filter(|v| f.values & (1u64 << v) != 0)
        .map(|v: u32| v.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests;
