//! Human-readable output: sizes, tables and usage bars.

/// 1536 -> "1.5 KiB".
pub fn bytes(n: u64) -> String {
    const UNITS: [&str; 6] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    if n < 1024 {
        return format!("{n} B");
    }
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u < UNITS.len() - 1 {
        v /= 1024.0;
        u += 1;
    }
    format!("{v:.1} {}", UNITS[u])
}

/// A bar of `width` cells filled in proportion to used/total.
pub fn bar(used: u64, total: u64, width: usize) -> String {
    let filled = if total == 0 {
        0
    } else {
        let f = (used as f64 / total as f64 * width as f64).ceil() as usize;
        f.min(width)
    };
    format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
}

/// Left-aligned columns sized to their widest cell; `right` marks columns to
/// right-align (numbers).
pub fn table(header: &[&str], rows: &[Vec<String>], right: &[usize]) -> String {
    let mut w: Vec<usize> = header.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let mut s = String::new();
        for (i, c) in cells.iter().enumerate() {
            let pad = w[i] - c.chars().count();
            if i > 0 {
                s.push_str("  ");
            }
            if right.contains(&i) {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            } else {
                s.push_str(c);
                if i + 1 < cells.len() {
                    s.push_str(&" ".repeat(pad));
                }
            }
        }
        s
    };
    let mut out = line(header.iter().map(|h| h.to_string()).collect());
    out.push('\n');
    for r in rows {
        out.push_str(&line(r.clone()));
        out.push('\n');
    }
    out
}

/// Bytes as a classic hex dump starting at `base`.
pub fn hexdump(data: &[u8], base: u64) -> String {
    let mut out = String::new();
    for (i, chunk) in data.chunks(16).enumerate() {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        let ascii: String = chunk
            .iter()
            .map(|&b| {
                if (0x20..0x7f).contains(&b) {
                    b as char
                } else {
                    '.'
                }
            })
            .collect();
        out.push_str(&format!(
            "{:016x}  {:<47}  |{ascii}|\n",
            base + 16 * i as u64,
            hex.join(" ")
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_naturally() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1536), "1.5 KiB");
        assert_eq!(bytes(16 << 30), "16.0 GiB");
    }

    #[test]
    fn bars_fill_in_proportion() {
        assert_eq!(bar(0, 100, 10), "[..........]");
        assert_eq!(bar(1, 100, 10), "[#.........]");
        assert_eq!(bar(50, 100, 10), "[#####.....]");
        assert_eq!(bar(100, 100, 10), "[##########]");
        assert_eq!(bar(5, 0, 4), "[....]");
    }

    #[test]
    fn tables_align_columns() {
        let t = table(
            &["a", "num"],
            &[
                vec!["xyz".into(), "1".into()],
                vec!["q".into(), "100".into()],
            ],
            &[1],
        );
        assert_eq!(t, "a    num\nxyz    1\nq    100\n");
    }

    #[test]
    fn hexdump_shows_offsets_and_ascii() {
        let d = hexdump(b"AB\x00", 0x10);
        assert_eq!(d, format!("{:016x}  {:<47}  |AB.|\n", 0x10, "41 42 00"));
    }
}
