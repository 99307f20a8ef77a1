//! `strftime_now(format)`: the current UTC time formatted as Python's `strftime` does, for
//! templates that put today's date in the system prompt (Llama 3.x).

#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
use std::time::{SystemTime, UNIX_EPOCH};

use minijinja::{Error, ErrorKind};

const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];
const DAYS: [&str; 7] = [
    "Monday",
    "Tuesday",
    "Wednesday",
    "Thursday",
    "Friday",
    "Saturday",
    "Sunday",
];

pub fn strftime_now(format: String) -> Result<String, Error> {
    strftime(now()?, &format)
}

/// Seconds since the Unix epoch.
#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
fn now() -> Result<u64, Error> {
    Ok(SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0))
}

/// wasm32-unknown-unknown has no clock (`SystemTime::now` would trap): a template that asks
/// for the date gets an error instead.
#[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
fn now() -> Result<u64, Error> {
    Err(Error::new(
        ErrorKind::InvalidOperation,
        "strftime_now: this build (wasm32-unknown-unknown) has no clock",
    ))
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31) (Howard Hinnant's algorithm).
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

fn strftime(secs: u64, format: &str) -> Result<String, Error> {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, mo, d) = civil(days);
    let (h, mi, s) = (rem / 3600, rem % 3600 / 60, rem % 60);
    let wd = (days + 3).rem_euclid(7) as usize; // 1970-01-01 was a Thursday
    let doy = days - {
        let mut jan1 = days;
        while civil(jan1 - 1).0 == y {
            jan1 -= 1;
        }
        jan1
    } + 1;
    let mut out = String::new();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(f) = chars.next() else {
            return Err(Error::new(
                ErrorKind::InvalidOperation,
                "strftime_now: the format ends with a lone %",
            ));
        };
        let month = MONTHS[mo as usize - 1];
        let day = DAYS[wd];
        match f {
            'Y' => out.push_str(&y.to_string()),
            'y' => out.push_str(&format!("{:02}", y % 100)),
            'm' => out.push_str(&format!("{mo:02}")),
            'd' => out.push_str(&format!("{d:02}")),
            '-' if chars.clone().next() == Some('d') => {
                chars.next();
                out.push_str(&d.to_string());
            }
            'B' => out.push_str(month),
            'b' | 'h' => out.push_str(&month[..3]),
            'A' => out.push_str(day),
            'a' => out.push_str(&day[..3]),
            'H' => out.push_str(&format!("{h:02}")),
            'I' => out.push_str(&format!("{:02}", (h + 11) % 12 + 1)),
            'p' => out.push_str(if h < 12 { "AM" } else { "PM" }),
            'M' => out.push_str(&format!("{mi:02}")),
            'S' => out.push_str(&format!("{s:02}")),
            'j' => out.push_str(&format!("{doy:03}")),
            '%' => out.push('%'),
            other => {
                return Err(Error::new(
                    ErrorKind::InvalidOperation,
                    format!("strftime_now: %{other} is not supported"),
                ))
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::strftime;

    #[test]
    fn formats_like_python() {
        // 2024-02-29 13:05:09 UTC, a Thursday
        let t = 1_709_211_909;
        assert_eq!(
            strftime(t, "%d %b %Y, %A %H:%M:%S %j %I%p %%").unwrap(),
            "29 Feb 2024, Thursday 13:05:09 060 01PM %"
        );
        assert_eq!(strftime(0, "%B %-d %y").unwrap(), "January 1 70");
    }
}
