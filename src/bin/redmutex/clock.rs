//! Times as people read them: spans (`27.8 s`, `4 min 59 s`) and UTC timestamps.

/// A span of milliseconds, short: `850 ms`, `27.8 s`, `4 min 59 s`, `2 h 5 min`.
pub(crate) fn span(ms: i64) -> String {
    let sign = if ms < 0 { "-" } else { "" };
    let ms = ms.unsigned_abs();
    let text = match ms {
        0..1_000 => format!("{ms} ms"),
        1_000..60_000 => format!("{:.1} s", ms as f64 / 1000.0),
        60_000..3_600_000 => format!("{} min {} s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{} h {} min", ms / 3_600_000, ms % 3_600_000 / 60_000),
    };
    format!("{sign}{text}")
}

pub(crate) use crate::utc::timestamp;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_pick_a_unit() {
        assert_eq!(span(850), "850 ms");
        assert_eq!(span(27_840), "27.8 s");
        assert_eq!(span(299_000), "4 min 59 s");
        assert_eq!(span(-1_500), "-1.5 s");
    }
}
