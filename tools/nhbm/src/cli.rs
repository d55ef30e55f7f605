//! The command-line pieces every neuron_hbm program shares: the device
//! argument (`-d N` or `-d /dev/neuron_hbmN`) and numbers written as
//! `4096`, `0x1000`, `4K` or `1_000`.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::device::device_path;

/// A device node: `/dev/neuron_hbmN` by its number, or any path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceNode {
    /// The node to open.
    pub path: PathBuf,
    /// N, when the node is `/dev/neuron_hbmN` (given by number or by that path).
    pub index: Option<u32>,
}

impl DeviceNode {
    /// `/dev/neuron_hbm<index>`.
    pub fn numbered(index: u32) -> Self {
        DeviceNode {
            path: device_path(index),
            index: Some(index),
        }
    }
}

impl Default for DeviceNode {
    fn default() -> Self {
        Self::numbered(0)
    }
}

impl fmt::Display for DeviceNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())
    }
}

/// A device argument that is neither a number nor a path.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is neither a device number nor a path")]
pub struct BadDevice(String);

impl FromStr for DeviceNode {
    type Err = BadDevice;

    fn from_str(s: &str) -> Result<Self, BadDevice> {
        if s.contains('/') {
            let path = PathBuf::from(s);
            let index = path
                .file_name()
                .and_then(|n| n.to_str()?.strip_prefix("neuron_hbm")?.parse().ok())
                .filter(|&n| device_path(n) == path);
            return Ok(DeviceNode { path, index });
        }
        parse_num(s)
            .map(Self::numbered)
            .ok_or_else(|| BadDevice(s.to_string()))
    }
}

/// `-d N` / `--device N|PATH`: the device a program works on.
#[derive(clap::Args, Clone, Debug, Default)]
pub struct DeviceArg {
    /// Device number N (/dev/neuron_hbmN) or a device node's path [default: 0]
    #[arg(short = 'd', long = "device", value_name = "N|PATH", global = true)]
    pub device: Option<DeviceNode>,
}

impl DeviceArg {
    /// The device named, or `/dev/neuron_hbm0`.
    pub fn node(&self) -> DeviceNode {
        self.device.clone().unwrap_or_default()
    }

    /// The device's number N; a path other than `/dev/neuron_hbmN` is refused.
    pub fn index(&self) -> Result<u32, BadDevice> {
        let node = self.node();
        node.index
            .ok_or_else(|| BadDevice(node.path.display().to_string()))
    }
}

/// A number that is not one.
#[derive(Debug, thiserror::Error)]
#[error("{0:?} is not a number (decimal, 0x-hex, or with a K/M/G suffix)")]
pub struct BadNumber(String);

/// Decimal, 0x-hex, or with a K/M/G suffix (binary units); `_` separates
/// digits. `None` when it does not fit `T`.
pub fn parse_num<T: FromStr>(s: &str) -> Option<T> {
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

/// [`parse_num`] as a clap value parser.
pub fn num<T: FromStr>(s: &str) -> Result<T, BadNumber> {
    parse_num(s).ok_or_else(|| BadNumber(s.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Prog {
        #[command(flatten)]
        dev: DeviceArg,
        #[arg(long, value_parser = num::<u64>)]
        size: Option<u64>,
    }

    fn prog(args: &[&str]) -> Result<Prog, clap::Error> {
        Prog::try_parse_from(std::iter::once("prog").chain(args.iter().copied()))
    }

    #[test]
    fn device_by_number_or_path() {
        assert_eq!(prog(&[]).unwrap().dev.node(), DeviceNode::numbered(0));
        let p = prog(&["-d", "1"]).unwrap();
        assert_eq!(p.dev.node().path, PathBuf::from("/dev/neuron_hbm1"));
        assert_eq!(p.dev.index().unwrap(), 1);
        let p = prog(&["--device=/dev/neuron_hbm3"]).unwrap();
        assert_eq!(p.dev.index().unwrap(), 3);
        let p = prog(&["-d", "/tmp/node"]).unwrap();
        assert_eq!(p.dev.node().path, PathBuf::from("/tmp/node"));
        assert!(p.dev.index().is_err());
        assert!(prog(&["-d", "one"]).is_err());
        assert!(prog(&["-d"]).is_err());
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
        assert_eq!(prog(&["--size", "4K"]).unwrap().size, Some(4096));
        assert!(prog(&["--size", "lots"]).is_err());
    }
}
