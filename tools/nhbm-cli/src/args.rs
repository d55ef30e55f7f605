//! A small command-line parser: positional arguments and `--name [value]`.

use std::collections::HashMap;

pub struct Args {
    pub pos: Vec<String>,
    opts: HashMap<String, String>,
    flags: Vec<String>,
}

/// Options that take a value; every other `-x`/`--xyz` is a flag.
const WITH_VALUE: &[&str] = &[
    "-d",
    "--device",
    "--channel",
    "--planner",
    "--iterations",
    "--seed",
    "--max-stall",
    "-o",
    "--output",
    "--format",
    "--tpb",
    "--arch",
];

impl Args {
    pub fn parse(raw: impl IntoIterator<Item = String>) -> Result<Args, String> {
        let mut a = Args {
            pos: Vec::new(),
            opts: HashMap::new(),
            flags: Vec::new(),
        };
        let mut it = raw.into_iter();
        while let Some(s) = it.next() {
            if s == "--" {
                a.pos.extend(it.by_ref());
                break;
            }
            if s.starts_with('-') && s.len() > 1 && s.parse::<i64>().is_err() {
                let (name, inline) = match s.split_once('=') {
                    Some((n, v)) => (n.to_string(), Some(v.to_string())),
                    None => (s.clone(), None),
                };
                if WITH_VALUE.contains(&name.as_str()) {
                    let v = match inline {
                        Some(v) => v,
                        None => it.next().ok_or_else(|| format!("{name} needs a value"))?,
                    };
                    a.opts.insert(canonical(&name).to_string(), v);
                } else {
                    a.flags.push(canonical(&name).to_string());
                }
            } else {
                a.pos.push(s);
            }
        }
        Ok(a)
    }

    pub fn flag(&self, name: &str) -> bool {
        self.flags.iter().any(|f| f == name)
    }

    pub fn opt(&self, name: &str) -> Option<&str> {
        self.opts.get(name).map(String::as_str)
    }

    pub fn opt_num<T: std::str::FromStr>(&self, name: &str) -> Result<Option<T>, String> {
        self.opt(name)
            .map(|v| parse_num(v).ok_or_else(|| format!("{name}: {v:?} is not a number")))
            .transpose()
    }

    /// Flags that none of `known` names.
    pub fn unknown(&self, known: &[&str]) -> Option<String> {
        self.flags
            .iter()
            .chain(self.opts.keys())
            .find(|f| !known.contains(&f.as_str()) && !["--device", "--json"].contains(&f.as_str()))
            .cloned()
    }
}

fn canonical(name: &str) -> &str {
    match name {
        "-d" => "--device",
        "-o" => "--output",
        "-j" => "--json",
        "-h" => "--help",
        n => n,
    }
}

/// Decimal, 0x-hex, or with a K/M/G suffix (binary units).
pub fn parse_num<T: std::str::FromStr>(s: &str) -> Option<T> {
    let s = s.trim().replace('_', "");
    let (body, mult) = match s.chars().last()? {
        'k' | 'K' => (&s[..s.len() - 1], 1u64 << 10),
        'm' | 'M' => (&s[..s.len() - 1], 1 << 20),
        'g' | 'G' if !s.starts_with("0x") => (&s[..s.len() - 1], 1 << 30),
        _ => (&s[..], 1),
    };
    let v = match body.strip_prefix("0x").or_else(|| body.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16).ok()?,
        None => body.parse::<u64>().ok()?,
    };
    v.checked_mul(mult)?.to_string().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(v: &[&str]) -> Args {
        Args::parse(v.iter().map(|s| s.to_string())).unwrap()
    }

    #[test]
    fn options_flags_and_positionals() {
        let a = args(&[
            "plan",
            "m.json",
            "-d",
            "1",
            "--planner=hill_climb",
            "--json",
            "-o",
            "out",
        ]);
        assert_eq!(a.pos, vec!["plan", "m.json"]);
        assert_eq!(a.opt("--device"), Some("1"));
        assert_eq!(a.opt("--planner"), Some("hill_climb"));
        assert_eq!(a.opt("--output"), Some("out"));
        assert!(a.flag("--json"));
        assert_eq!(a.unknown(&["--planner", "--output"]), None);
        assert_eq!(args(&["x", "--bogus"]).unknown(&[]), Some("--bogus".into()));
        assert!(Args::parse(["--seed".to_string()]).is_err());
    }

    #[test]
    fn numbers_in_every_spelling() {
        assert_eq!(parse_num::<u64>("4096"), Some(4096));
        assert_eq!(parse_num::<u64>("0x1000"), Some(4096));
        assert_eq!(parse_num::<u64>("4K"), Some(4096));
        assert_eq!(parse_num::<u64>("2G"), Some(2 << 30));
        assert_eq!(parse_num::<u64>("1_000"), Some(1000));
        assert_eq!(parse_num::<u32>("0xFFFFFFFFF"), None);
        assert_eq!(parse_num::<u64>("12x"), None);
    }
}
