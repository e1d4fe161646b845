//! A command's arguments split into options (with their values) and operands, the way
//! getopt reads them.

use super::walker::Arg;

/// A command's arguments split into options (with their values) and operands.
pub(super) struct Opts {
    /// Each option as written (`-f`, `--force`) with its value, if it takes one.
    pub options: Vec<(String, Option<Arg>)>,
    /// The operands, in order.
    pub operands: Vec<Arg>,
}

impl Opts {
    /// Splits `args`: `--` ends the options; `--name=value`; `valued` lists the options that
    /// take the next word (or, for a short one, the rest of its cluster) as their value;
    /// `-abc` is `-a -b -c`. A word the gate cannot resolve is an operand.
    pub(super) fn parse(args: &[Arg], valued: &[&str]) -> Self {
        let mut options = Vec::new();
        let mut operands = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let arg = &args[i];
            i += 1;
            let Some(text) = arg.fixed().filter(|_| arg.is_option()) else {
                operands.push(arg.clone());
                continue;
            };
            if text == "--" {
                operands.extend(args[i..].iter().cloned());
                break;
            }
            if let Some(long) = text.strip_prefix("--") {
                match long.split_once('=') {
                    Some((name, value)) => {
                        options.push((format!("--{name}"), Some(Arg::Fixed(value.to_string()))))
                    }
                    None if valued.contains(&text) => {
                        options.push((text.to_string(), args.get(i).cloned()));
                        i += 1;
                    }
                    None => options.push((text.to_string(), None)),
                }
                continue;
            }
            let cluster: Vec<char> = text[1..].chars().collect();
            for (k, c) in cluster.iter().enumerate() {
                let name = format!("-{c}");
                if valued.contains(&name.as_str()) {
                    let rest: String = cluster[k + 1..].iter().collect();
                    let value = if rest.is_empty() {
                        let v = args.get(i).cloned();
                        i += 1;
                        v
                    } else {
                        Some(Arg::Fixed(rest))
                    };
                    options.push((name, value));
                    break;
                }
                options.push((name, None));
            }
        }
        Self { options, operands }
    }

    /// Parses options only up to the first operand (a wrapper's command): returns them and
    /// the arguments from that operand on.
    pub(super) fn leading<'a>(args: &'a [Arg], valued: &[&str]) -> (Self, &'a [Arg]) {
        let mut end = 0;
        while end < args.len() {
            let arg = &args[end];
            let Some(text) = arg.fixed().filter(|_| arg.is_option()) else {
                break;
            };
            end += 1;
            if text == "--" {
                let opts = Self::parse(&args[..end - 1], valued);
                return (opts, &args[end..]);
            }
            let takes_next = if text.starts_with("--") {
                !text.contains('=') && valued.contains(&text)
            } else {
                // The last valued letter of a cluster with nothing after it takes the next word.
                let cluster: Vec<char> = text[1..].chars().collect();
                cluster.iter().enumerate().any(|(k, c)| {
                    valued.contains(&format!("-{c}").as_str()) && k + 1 == cluster.len()
                }) && !cluster[..cluster.len().saturating_sub(1)]
                    .iter()
                    .any(|c| valued.contains(&format!("-{c}").as_str()))
            };
            if takes_next {
                end += 1;
            }
        }
        let end = end.min(args.len());
        (Self::parse(&args[..end], valued), &args[end..])
    }

    /// Whether any of `names` was given.
    pub(super) fn has(&self, names: &[&str]) -> bool {
        self.options
            .iter()
            .any(|(n, _)| names.contains(&n.as_str()))
    }

    /// The values of the options in `names`, in order.
    pub(super) fn values(&self, names: &[&str]) -> Vec<Arg> {
        self.options
            .iter()
            .filter(|(n, _)| names.contains(&n.as_str()))
            .filter_map(|(_, v)| v.clone())
            .collect()
    }
}

/// Whether a fixed argument equals one of `names` (for flags without values).
pub(super) fn has_option(args: &[Arg], names: &[&str]) -> bool {
    args.iter()
        .any(|a| a.fixed().is_some_and(|s| names.contains(&s)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_split_clusters_values_and_the_end_marker() {
        let args: Vec<Arg> = ["-rf", "-t", "dir", "--suffix=.b", "--", "-x"]
            .iter()
            .map(|s| Arg::Fixed(s.to_string()))
            .collect();
        let o = Opts::parse(&args, &["-t", "--suffix"]);
        assert!(o.has(&["-r"]) && o.has(&["-f"]));
        assert_eq!(o.values(&["-t"]), vec![Arg::Fixed("dir".into())]);
        assert_eq!(o.values(&["--suffix"]), vec![Arg::Fixed(".b".into())]);
        assert_eq!(o.operands, vec![Arg::Fixed("-x".into())]);
    }
}
