//! Time stamps as logs print them, read into one clock: glog / c10 (`E1127 05:33:50.123456`),
//! ISO 8601 and Python logging (`2024-11-27 05:33:50,123`), torchrun's summary
//! (`2024-11-27_05:33:50`), syslog / journal (`Nov 27 05:33:50`), `dmesg -T`
//! (`[Wed Nov 27 05:33:50 2024]`), Hugging Face (`11/27/2024 05:33:50`) and Unix seconds.
//!
//! A stamp without a year (glog, syslog) is kept apart from the year and placed in the year the
//! bundle's other stamps show; a stamp without a zone is read as UTC. `dmesg`'s seconds since
//! boot are not a wall-clock time and are not read.

/// A wall-clock time as printed: the year when it was printed, the rest always.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wall {
    /// The year, when printed.
    pub year: Option<i32>,
    /// Month, 1-12.
    pub month: u32,
    /// Day of the month, 1-31.
    pub day: u32,
    /// Microseconds since midnight.
    pub micros: i64,
    /// Minutes east of UTC, when a zone was printed.
    pub zone_minutes: Option<i32>,
}

/// The year a stamp without one is read in when the bundle shows no year at all (a leap year,
/// so that February 29 has a day).
pub const FALLBACK_YEAR: i32 = 2000;

const MICROS_PER_DAY: i64 = 86_400_000_000;

impl Wall {
    /// Microseconds since the Unix epoch, in `default_year` when the stamp has no year.
    pub fn to_us(&self, default_year: i32) -> i64 {
        let year = self.year.unwrap_or(default_year);
        let days = days_from_civil(year, self.month, self.day);
        let zone = i64::from(self.zone_minutes.unwrap_or(0)) * 60_000_000;
        days * MICROS_PER_DAY + self.micros - zone
    }

    /// The time of Unix second `secs` (UTC).
    pub fn from_unix(secs: i64) -> Option<Self> {
        if !(0..=253_402_300_799).contains(&secs) {
            return None;
        }
        let days = secs.div_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        Some(Self {
            year: Some(year),
            month,
            day,
            micros: secs.rem_euclid(86_400) * 1_000_000,
            zone_minutes: Some(0),
        })
    }
}

/// Days since 1970-01-01 of a civil date (proleptic Gregorian).
fn days_from_civil(year: i32, month: u32, day: u32) -> i64 {
    let y = i64::from(year) - i64::from(month <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i64::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The civil date of a day since 1970-01-01.
fn civil_from_days(days: i64) -> (i32, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = (yoe + era * 400 + i64::from(month <= 2)) as i32;
    (year, month, day)
}

/// A stamp found in a line, with its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The time.
    pub wall: Wall,
    /// The stamp as printed.
    pub text: String,
}

/// How far into a line a stamp is looked for (after rank, host and process prefixes).
const SEARCH_WINDOW: usize = 96;

/// The first time stamp at the start of `line` or right after one of its leading prefixes
/// (`[rank3]:`, `node-1 [stderr] `, `[default0]:`).
pub fn find(line: &str) -> Option<Found> {
    let window = &line.as_bytes()[..line.len().min(SEARCH_WINDOW)];
    let mut starts = vec![0];
    for (i, pair) in window.windows(2).enumerate() {
        if matches!(pair, [b']', b':'] | [b']', b' '] | [b':', b' '] | [b')', b' ']) {
            starts.push(i + 2);
        }
    }
    for start in starts {
        let rest = line.get(start..)?.trim_start();
        if let Some((wall, len)) = at_start(rest) {
            return Some(Found {
                wall,
                text: rest[..len].trim_start_matches('[').trim_end().to_owned(),
            });
        }
    }
    None
}

/// A stamp at the very start of `s`, with its length.
pub fn at_start(s: &str) -> Option<(Wall, usize)> {
    let b = s.as_bytes();
    let skip = usize::from(b.first() == Some(&b'['));
    let rest = &s[skip..];
    iso(rest)
        .or_else(|| glog(rest))
        .or_else(|| syslog(rest, false))
        .or_else(|| dmesg_t(rest))
        .or_else(|| us_date(rest))
        .map(|(wall, len)| (wall, len + skip))
}

fn digits(b: &[u8], at: usize, n: usize) -> Option<u32> {
    let part = b.get(at..at + n)?;
    if !part.iter().all(u8::is_ascii_digit) {
        return None;
    }
    part.iter()
        .try_fold(0u32, |acc, d| Some(acc * 10 + u32::from(d - b'0')))
}

/// `HH:MM:SS[.frac]` at `at`: microseconds since midnight and the end.
fn time_of_day(b: &[u8], at: usize) -> Option<(i64, usize)> {
    let h = digits(b, at, 2)?;
    let m = digits(b, at + 3, 2)?;
    let s = digits(b, at + 6, 2)?;
    if b.get(at + 2) != Some(&b':') || b.get(at + 5) != Some(&b':') || h > 23 || m > 59 || s > 60 {
        return None;
    }
    let mut end = at + 8;
    let mut micros = i64::from(h * 3600 + m * 60 + s) * 1_000_000;
    if matches!(b.get(end), Some(b'.' | b',')) && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
        end += 1;
        let mut scale = 100_000i64;
        while let Some(d) = b.get(end).filter(|d| d.is_ascii_digit()) {
            micros += i64::from(d - b'0') * scale;
            scale /= 10;
            end += 1;
        }
    }
    Some((micros, end))
}

fn valid_date(month: u32, day: u32) -> bool {
    (1..=12).contains(&month) && (1..=31).contains(&day)
}

/// `2024-11-27T05:33:50.123Z`, `2024-11-27 05:33:50,123 +02:00`, `2024-11-27_05:33:50`.
fn iso(s: &str) -> Option<(Wall, usize)> {
    let b = s.as_bytes();
    let year = digits(b, 0, 4)?;
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') || !matches!(b.get(10), Some(b'T' | b' ' | b'_')) {
        return None;
    }
    if !valid_date(month, day) {
        return None;
    }
    let (micros, mut end) = time_of_day(b, 11)?;
    let mut zone = None;
    // A zone may follow after one space (`05:33:50,123 +02:00`).
    let spaced = b.get(end) == Some(&b' ')
        && matches!(b.get(end + 1), Some(b'+' | b'-'))
        && b.get(end + 2).is_some_and(u8::is_ascii_digit);
    if spaced {
        end += 1;
    }
    match b.get(end) {
        Some(b'Z') => {
            zone = Some(0);
            end += 1;
        }
        Some(sign @ (b'+' | b'-')) => {
            let hours = digits(b, end + 1, 2);
            let colon = usize::from(b.get(end + 3) == Some(&b':'));
            let minutes = digits(b, end + 3 + colon, 2);
            if let (Some(h), Some(m)) = (hours, minutes) {
                let total = (h * 60 + m) as i32;
                zone = Some(if *sign == b'-' { -total } else { total });
                end += 5 + colon;
            }
        }
        _ => {}
    }
    let wall = Wall {
        year: Some(year as i32),
        month,
        day,
        micros,
        zone_minutes: zone,
    };
    Some((wall, end))
}

/// glog and c10: `E1127 05:33:50.123456` (level letter, month and day), `I321 02:07:08.4`.
fn glog(s: &str) -> Option<(Wall, usize)> {
    let b = s.as_bytes();
    if !matches!(b.first(), Some(b'I' | b'W' | b'E' | b'F')) {
        return None;
    }
    let n = b[1..].iter().take_while(|d| d.is_ascii_digit()).count();
    let (month, day) = match n {
        4 => (digits(b, 1, 2)?, digits(b, 3, 2)?),
        3 => (digits(b, 1, 1)?, digits(b, 2, 2)?),
        _ => return None,
    };
    if b.get(1 + n) != Some(&b' ') || !valid_date(month, day) {
        return None;
    }
    let (micros, end) = time_of_day(b, 2 + n)?;
    let wall = Wall {
        year: None,
        month,
        day,
        micros,
        zone_minutes: None,
    };
    Some((wall, end))
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn month_name(b: &[u8], at: usize) -> Option<u32> {
    let name = b.get(at..at + 3)?;
    MONTHS
        .iter()
        .position(|m| m.as_bytes() == name)
        .map(|i| i as u32 + 1)
}

/// syslog / journal `Nov 27 05:33:50` (`Nov  7`); with `year_after`, `dmesg -T`'s
/// `Nov 27 05:33:50 2024`.
fn syslog(s: &str, year_after: bool) -> Option<(Wall, usize)> {
    let b = s.as_bytes();
    let month = month_name(b, 0)?;
    if b.get(3) != Some(&b' ') {
        return None;
    }
    let at = if b.get(4) == Some(&b' ') { 5 } else { 4 };
    let n = b[at..].iter().take_while(|d| d.is_ascii_digit()).count();
    let day = match n {
        1 => digits(b, at, 1)?,
        2 => digits(b, at, 2)?,
        _ => return None,
    };
    if b.get(at + n) != Some(&b' ') || !valid_date(month, day) {
        return None;
    }
    let (micros, mut end) = time_of_day(b, at + n + 1)?;
    let mut year = None;
    if year_after {
        year = Some(digits(b, end + 1, 4)? as i32);
        end += 5;
    }
    let wall = Wall {
        year,
        month,
        day,
        micros,
        zone_minutes: None,
    };
    Some((wall, end))
}

/// A syslog / journal stamp (`Nov 27 05:33:50`) at the start of `s`.
pub fn syslog_at_start(s: &str) -> Option<(Wall, usize)> {
    syslog(s, false)
}

/// `dmesg -T`: `Wed Nov 27 05:33:50 2024` (the bracket is skipped by the caller).
fn dmesg_t(s: &str) -> Option<(Wall, usize)> {
    let b = s.as_bytes();
    let weekday = b.get(..4)?;
    if !(weekday[..3].iter().all(u8::is_ascii_alphabetic) && weekday[3] == b' ') {
        return None;
    }
    syslog(&s[4..], true).map(|(wall, len)| (wall, len + 4))
}

/// Hugging Face's `11/27/2024 05:33:50`.
fn us_date(s: &str) -> Option<(Wall, usize)> {
    let b = s.as_bytes();
    let month = digits(b, 0, 2)?;
    let day = digits(b, 3, 2)?;
    let year = digits(b, 6, 4)?;
    if b.get(2) != Some(&b'/') || b.get(5) != Some(&b'/') || b.get(10) != Some(&b' ') {
        return None;
    }
    if !valid_date(month, day) {
        return None;
    }
    let (micros, end) = time_of_day(b, 11)?;
    let wall = Wall {
        year: Some(year as i32),
        month,
        day,
        micros,
        zone_minutes: None,
    };
    Some((wall, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(line: &str) -> Option<i64> {
        find(line).map(|f| f.wall.to_us(2024))
    }

    #[test]
    fn iso_stamps_with_and_without_zone_are_one_clock() {
        let z = us("2024-11-27T05:33:50.5Z rest");
        let plus = us("2024-11-27 07:33:50,500 +02:00 rest");
        assert_eq!(z, plus);
        assert_eq!(z, Some(1_732_685_630_500_000));
    }

    #[test]
    fn glog_stamps_after_a_rank_prefix_take_the_bundles_year() {
        let found = find("[rank0]:[E1127 05:33:50.123456789 ProcessGroupNCCL.cpp:607] boom");
        let found = found.unwrap_or_else(|| panic!("no stamp found"));
        assert_eq!(found.wall.year, None);
        assert_eq!(found.wall.to_us(2024), 1_732_685_630_123_456);
        assert_eq!(found.text, "E1127 05:33:50.123456789");
    }

    #[test]
    fn old_c10_stamps_with_a_three_digit_date_are_read() {
        assert_eq!(
            find("[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] x").map(|f| (f.wall.month, f.wall.day)),
            Some((3, 21))
        );
    }

    #[test]
    fn torchrun_summary_and_syslog_and_dmesg_t_stamps_are_read() {
        assert_eq!(
            us("  time      : 2024-11-27_05:33:50"),
            us("2024-11-27T05:33:50Z")
        );
        assert_eq!(
            us("Nov 27 05:33:50 node-3 kernel: NVRM: Xid"),
            us("2024-11-27T05:33:50Z")
        );
        assert_eq!(
            us("[Wed Nov 27 05:33:50 2024] NVRM: Xid"),
            us("2024-11-27T05:33:50Z")
        );
        assert_eq!(us("11/27/2024 05:33:50 - INFO - x"), us("2024-11-27T05:33:50Z"));
    }

    #[test]
    fn seconds_since_boot_and_plain_text_are_no_stamp() {
        assert_eq!(find("[ 1234.567890] NVRM: Xid (PCI:0000:3b:00): 79"), None);
        assert_eq!(find("Traceback (most recent call last):"), None);
        assert_eq!(find("Error 2024-13-45T99:99:99"), None);
    }

    #[test]
    fn unix_seconds_round_trip() {
        let wall = Wall::from_unix(1_732_685_630).unwrap_or_else(|| panic!("in range"));
        assert_eq!((wall.year, wall.month, wall.day), (Some(2024), 11, 27));
        assert_eq!(wall.to_us(FALLBACK_YEAR), 1_732_685_630_000_000);
        assert_eq!(Wall::from_unix(-1), None);
    }
}
