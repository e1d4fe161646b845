//! `curl` and `wget`: uploads need `send`; the files they save are writes.

use super::opts::Opts;
use super::walker::{Arg, Invocation, Walker};
use crate::runner::safety::grants::{GrantKind, Target};

// ─── Network ────────────────────────────────────────────────────────────────

pub(super) fn curl(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-o",
            "-d",
            "-F",
            "-T",
            "-X",
            "-H",
            "-A",
            "-b",
            "-c",
            "-e",
            "-E",
            "-K",
            "-m",
            "-r",
            "-u",
            "-U",
            "-w",
            "-x",
            "-y",
            "-Y",
            "-z",
            "-C",
            "-D",
            "-Q",
            "-t",
            "--output",
            "--data",
            "--data-raw",
            "--data-binary",
            "--data-urlencode",
            "--data-ascii",
            "--form",
            "--form-string",
            "--upload-file",
            "--request",
            "--header",
            "--user-agent",
            "--cookie",
            "--cookie-jar",
            "--referer",
            "--cert",
            "--config",
            "--max-time",
            "--range",
            "--user",
            "--write-out",
            "--proxy",
            "--dump-header",
            "--json",
            "--url",
            "--output-dir",
            "--trace",
            "--trace-ascii",
            "--stderr",
            "--etag-save",
            "--quote",
            "--mail-rcpt",
            "--mail-from",
            "--libcurl",
        ],
    );
    if opts.has(&["-K", "--config"]) {
        w.need_shell("curl reading its options from a file");
    }
    for out in opts.values(&[
        "-o",
        "--output",
        "-c",
        "--cookie-jar",
        "-D",
        "--dump-header",
        "--trace",
        "--trace-ascii",
        "--stderr",
        "--etag-save",
        "--libcurl",
    ]) {
        if out.fixed() != Some("-") {
            w.write_target(&out, "curl");
        }
    }
    let dir = opts.values(&["--output-dir"]).pop();
    if opts.has(&["-J", "--remote-header-name"]) {
        w.write_target(&Arg::Dynamic("(a name the server gives)".into()), "curl -J");
    } else if opts.has(&["-O", "--remote-name", "--remote-name-all"]) {
        for url in &opts.operands {
            let name = url
                .fixed()
                .map(|u| u.split(['?', '#']).next().unwrap_or(u))
                .and_then(|u| u.rsplit('/').next())
                .filter(|n| !n.is_empty());
            let target = match (name, dir.as_ref().and_then(Arg::fixed)) {
                (Some(n), Some(d)) => Arg::Fixed(format!("{d}/{n}")),
                (Some(n), None) => Arg::Fixed(n.to_string()),
                (None, _) => Arg::Dynamic(url.text()),
            };
            w.write_target(&target, "curl -O");
        }
    }
    let method = opts
        .values(&["-X", "--request"])
        .pop()
        .map(|m| m.text().to_uppercase());
    let uploads = opts.options.iter().any(|(n, _)| {
        n.starts_with("--data")
            || n.starts_with("--form")
            || matches!(
                n.as_str(),
                "-d" | "-F" | "-T" | "--upload-file" | "--json" | "-Q" | "--quote" | "--mail-rcpt"
            )
    }) || method.is_some_and(|m| !matches!(m.as_str(), "GET" | "HEAD" | "OPTIONS"));
    if uploads {
        let to: Vec<String> = opts.operands.iter().map(Arg::text).collect();
        w.need(
            GrantKind::Send,
            Target::Unknown,
            format!("sending data to {} with curl", to.join(" ")),
        );
    }
}

pub(super) fn wget(w: &mut Walker<'_>, inv: &Invocation) {
    let opts = Opts::parse(
        &inv.args,
        &[
            "-O",
            "-o",
            "-a",
            "-P",
            "-i",
            "-e",
            "-U",
            "-t",
            "-T",
            "-w",
            "-Q",
            "-l",
            "-A",
            "-R",
            "-D",
            "-I",
            "-X",
            "--output-document",
            "--output-file",
            "--append-output",
            "--directory-prefix",
            "--input-file",
            "--execute",
            "--post-data",
            "--post-file",
            "--body-data",
            "--body-file",
            "--method",
            "--user-agent",
            "--header",
            "--user",
            "--password",
            "--load-cookies",
            "--save-cookies",
        ],
    );
    if opts.has(&["-e", "--execute"]) {
        w.need_shell("wget running a configuration command");
    }
    for out in opts.values(&[
        "-O",
        "--output-document",
        "-o",
        "--output-file",
        "--save-cookies",
    ]) {
        if out.fixed() != Some("-") {
            w.write_target(&out, "wget");
        }
    }
    if opts.has(&["-N", "--timestamping"]) {
        w.write_target(&Arg::Dynamic("(the downloaded files)".into()), "wget -N");
    }
    let method = opts
        .values(&["--method"])
        .pop()
        .map(|m| m.text().to_uppercase());
    if opts.has(&["--post-data", "--post-file", "--body-data", "--body-file"])
        || method.is_some_and(|m| !matches!(m.as_str(), "GET" | "HEAD" | "OPTIONS"))
    {
        w.need(GrantKind::Send, Target::Unknown, "sending data with wget");
    }
}
