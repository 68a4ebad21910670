use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().expect("timestamp")
}

/// The next point after `after`, as Go's RFC 3339 text.
fn next(schedule: &str, tz: Option<&str>, after: &str) -> String {
    let s = for_cron_job(schedule, tz).expect(schedule);
    format_rfc3339(&s.next(ts(after)).expect("a next point"))
}

#[test]
fn upstream_time_zone_cases() {
    // upstream `TestScheduleWithTimeZone` (the manager's zone is UTC in tests).
    let utc = Some("UTC");
    assert_eq!(
        next("0 10 * * ?", utc, "2022-09-05T09:01:00Z"),
        "2022-09-05T10:00:00Z"
    );
    assert_eq!(
        next("0 10 * * ?", utc, "2022-09-05T11:01:00Z"),
        "2022-09-06T10:00:00Z"
    );
    assert_eq!(
        next("0 10 * * ?", Some("Asia/Shanghai"), "2022-09-05T09:01:00Z"),
        "2022-09-06T10:00:00+08:00"
    );
    assert_eq!(
        next("0 10 * * ?", Some("Asia/Shanghai"), "2022-09-06T01:01:00Z"),
        "2022-09-06T10:00:00+08:00"
    );
    assert_eq!(
        next("TZ=Asia/Shanghai 0 10 * * ?", None, "2022-09-06T01:01:00Z"),
        "2022-09-06T10:00:00+08:00"
    );
    assert_eq!(
        next(
            "CRON_TZ=Asia/Shanghai 0 10 * * *",
            None,
            "2022-09-06T01:01:00Z"
        ),
        "2022-09-06T10:00:00+08:00"
    );
    // A schedule that names a zone wins over timeZone (upstream `formatSchedule`).
    assert_eq!(
        next(
            "TZ=UTC 0 10 * * *",
            Some("Asia/Shanghai"),
            "2022-09-06T01:01:00Z"
        ),
        "2022-09-06T10:00:00Z"
    );
}

#[test]
fn accepted_forms_and_their_points() {
    let t = "2025-10-10T09:00:00Z"; // a Friday
    let cases = [
        ("*/5 * * * *", "2025-10-10T09:05:00Z"),
        ("*/1 * * * *", "2025-10-10T09:01:00Z"),
        ("* * * * *", "2025-10-10T09:01:00Z"),
        ("5/20 * * * *", "2025-10-10T09:05:00Z"),
        ("10-20/5 9 * * *", "2025-10-10T09:10:00Z"),
        ("0,30 * * * *", "2025-10-10T09:30:00Z"),
        ("1,,2 * * * *", "2025-10-10T09:01:00Z"),
        ("0 0 1 jan *", "2026-01-01T00:00:00Z"),
        ("0 0 * * MON-wed", "2025-10-13T00:00:00Z"),
        ("0 0 * * sun", "2025-10-12T00:00:00Z"),
        ("0 0 * * 0", "2025-10-12T00:00:00Z"),
        ("+5 * * * *", "2025-10-10T09:05:00Z"),
        ("@hourly", "2025-10-10T10:00:00Z"),
        ("@daily", "2025-10-11T00:00:00Z"),
        ("@midnight", "2025-10-11T00:00:00Z"),
        ("@weekly", "2025-10-12T00:00:00Z"),
        ("@monthly", "2025-11-01T00:00:00Z"),
        ("@yearly", "2026-01-01T00:00:00Z"),
        ("@annually", "2026-01-01T00:00:00Z"),
        ("@every 10s", "2025-10-10T09:00:10Z"),
        ("@every 1h30m", "2025-10-10T10:30:00Z"),
        ("@every 1.5m", "2025-10-10T09:01:30Z"),
        ("@every 500ms", "2025-10-10T09:00:01Z"),
        ("@every -5s", "2025-10-10T09:00:01Z"),
        ("@every 0", "2025-10-10T09:00:01Z"),
        ("TZ=UTC @every 2s", "2025-10-10T09:00:02Z"),
        // Both day fields restricted: either matches (13th or a Monday).
        ("0 0 13 * 1", "2025-10-13T00:00:00Z"),
        ("0 0 11 * 1", "2025-10-11T00:00:00Z"),
        // One a star (`*`, `?`, `*/1`): both must match.
        ("0 0 * * 1", "2025-10-13T00:00:00Z"),
        ("0 0 ? * 6", "2025-10-11T00:00:00Z"),
        ("0 0 */1 * 6", "2025-10-11T00:00:00Z"),
        // `*/2` is no star for robfig: either matches (an odd day or a Monday).
        ("0 0 */2 * 1", "2025-10-11T00:00:00Z"),
    ];
    for (spec, want) in cases {
        assert_eq!(next(spec, Some("UTC"), t), want, "{spec}");
    }
    // Strictly after, sub-seconds dropped first (robfig rounds up to the next second).
    assert_eq!(
        next("@every 10s", None, "2025-10-10T09:00:00.7Z"),
        "2025-10-10T09:00:10Z"
    );
    assert_eq!(
        next("* * * * *", Some("UTC"), "2025-10-10T09:00:59.9Z"),
        "2025-10-10T09:01:00Z"
    );
}

#[test]
fn refused_forms_say_why() {
    let cases = [
        ("", "empty spec string"),
        ("* * * *", "expected exactly 5 fields, found 4"),
        ("0 * * * * *", "expected exactly 5 fields, found 6"),
        ("60 * * * *", "end of range (60) above maximum (59): 60"),
        ("* 24 * * *", "above maximum (23)"),
        ("* * 0 * *", "beginning of range (0) below minimum (1): 0"),
        ("* * * 13 *", "above maximum (12)"),
        ("* * * * 7", "end of range (7) above maximum (6): 7"),
        (
            "5-1 * * * *",
            "beginning of range (5) beyond end of range (1)",
        ),
        ("*/0 * * * *", "step of range should be a positive number"),
        ("1-2-3 * * * *", "too many hyphens: 1-2-3"),
        ("*/2/3 * * * *", "too many slashes"),
        ("a * * * *", "failed to parse int from a"),
        ("* * L * *", "failed to parse int from L"),
        ("* * 15W * *", "failed to parse int from 15W"),
        ("* * * * 1#2", "failed to parse int from 1#2"),
        ("* * * * mon#2", "failed to parse int from mon#2"),
        ("* * * jan-foo *", "failed to parse int from foo"),
        ("@reboot", "unrecognized descriptor: @reboot"),
        ("@every", "unrecognized descriptor: @every"),
        ("@every 10", "failed to parse duration @every 10"),
        ("@every 1d", "failed to parse duration @every 1d"),
        ("@every 1 h", "failed to parse duration"),
        (
            "TZ=Mars/Olympus * * * * *",
            "provided bad location Mars/Olympus",
        ),
        (
            "TZ=asia/shanghai * * * * *",
            "provided bad location asia/shanghai",
        ),
        ("TZ=UTC", "a TZ= prefix must be followed by a space"),
    ];
    for (spec, want) in cases {
        let err = parse_standard(spec).expect_err(spec).to_string();
        assert!(err.contains(want), "{spec:?}: {err:?} lacks {want:?}");
    }
}

#[test]
fn a_field_with_no_value_never_fires() {
    let s = parse_standard(", * * * *").expect("robfig accepts it");
    assert!(s.next(ts("2025-10-10T09:00:00Z")).is_none());
    // Feb 30 parses but never comes (robfig's zero time after five years).
    let s = parse_standard("0 0 30 2 *").expect("parses");
    assert!(s.next(ts("2025-10-10T09:00:00Z")).is_none());
}

#[test]
fn zones_load_as_go_loads_them() {
    assert!(load_location("Europe/Berlin").is_ok());
    assert!(load_location("UTC").is_ok());
    assert!(load_location("").is_ok());
    assert!(load_location("Local").is_ok());
    assert!(load_location("europe/berlin").is_err());
    assert!(load_location("Nowhere/City").is_err());
    // An unknown timeZone is left out, as upstream's `formatSchedule` does (the webhook refuses
    // it before).
    assert!(for_cron_job("0 10 * * *", Some("Nowhere/City")).is_ok());
}

#[test]
fn daylight_saving_gaps_and_folds_follow_croner() {
    // Europe/Berlin skips 02:00-03:00 on 2025-03-30: a 02:30 point runs at the end of the gap
    // (croner's rule for a fixed time; robfig skips that day). Documented in docs/kinds/advancedcronjob.md.
    let s = for_cron_job("30 2 * * *", Some("Europe/Berlin")).expect("parses");
    let n = s.next(ts("2025-03-29T12:00:00Z")).expect("next");
    assert_eq!(format_rfc3339(&n), "2025-03-30T03:00:00+02:00");
    assert_eq!(
        format_rfc3339(&s.next(n.timestamp()).expect("next")),
        "2025-03-31T02:30:00+02:00"
    );
    // 02:30 happens twice on 2025-10-26: one run, at the first.
    let n = s.next(ts("2025-10-25T12:00:00Z")).expect("next");
    assert_eq!(format_rfc3339(&n), "2025-10-26T02:30:00+02:00");
    assert_eq!(
        format_rfc3339(&s.next(n.timestamp()).expect("next")),
        "2025-10-27T02:30:00+01:00"
    );
}

#[test]
fn rfc3339_round_trips() {
    let z = ts("2025-10-10T09:05:00Z").to_zoned(TimeZone::UTC);
    assert_eq!(format_rfc3339(&z), "2025-10-10T09:05:00Z");
    assert_eq!(
        parse_rfc3339("2022-09-06T10:00:00+08:00"),
        Some(ts("2022-09-06T02:00:00Z"))
    );
    assert_eq!(parse_rfc3339("yesterday"), None);
}
