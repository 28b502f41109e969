//! The command lines README.md, deploy/README.md and docs/*.md show, so a renamed
//! subcommand, flag or manifest fails the build: every `health-orchestrator ...` command
//! (in shell code blocks, and in inline code) names a subcommand the binary has and only
//! flags its `--help` lists; those that run offline on the repository's own files
//! (`check-config` of files that exist here, `crds`, `config-schema`) run and exit 0, with the
//! `HO_*` variables a command line sets before them (`HO_X=1 health-orchestrator ...`); every
//! `kubectl apply -k` / `kubectl kustomize` of a directory here renders, and every
//! `kubectl apply -f` of a file here names one that exists; the alerts the docs count and
//! name are the PrometheusRule's. The expected subcommands and flags are read from the
//! binary's own help, not from a list kept here.

use std::process::Command;

use crate::cli::repo;

/// One command as a document shows it, with where.
pub(crate) struct Shown {
    pub(crate) place: String,
    pub(crate) words: Vec<String>,
    /// The variables the line sets for the command (`NAME=value` before it).
    pub(crate) env: Vec<(String, String)>,
}

/// A shell assignment `NAME=value` before a command.
fn assignment(word: &str) -> Option<(String, String)> {
    let (name, value) = word.split_once('=')?;
    let is_name = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    is_name.then(|| (name.to_owned(), value.to_owned()))
}

/// The words of `line`, quotes removed (as a shell splits them), and its operators (`&&`,
/// `||`, `|`, `;`, redirections) as words of their own.
fn words(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut quote = None;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, '#') if word.is_empty() => break,
            (None, c) if c.is_whitespace() || "&|;<>".contains(c) => {
                if !word.is_empty() {
                    out.push(std::mem::take(&mut word));
                }
                if !c.is_whitespace() {
                    let mut op = c.to_string();
                    while let Some(&next) = chars.peek().filter(|n| "&|<>".contains(**n)) {
                        op.push(next);
                        chars.next();
                    }
                    out.push(op);
                }
            }
            (None, c) => word.push(c),
        }
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// Each command of `line` (split at its operators), up to its first redirection.
fn commands(line: &str) -> Vec<Vec<String>> {
    let mut found = vec![Vec::new()];
    let mut redirected = false;
    for word in words(line) {
        match word.as_str() {
            "&&" | "||" | "|" | ";" | "&" => {
                found.push(Vec::new());
                redirected = false;
            }
            w if w.starts_with(['<', '>']) => redirected = true,
            _ if redirected => {}
            _ => found.last_mut().unwrap().push(word),
        }
    }
    found.retain(|c| !c.is_empty());
    found
}

/// Every command of `text` starting with `program`: shell code blocks' lines (continued
/// lines joined) and inline code spans.
pub(crate) fn shown_in(file: &str, text: &str, program: &str) -> Vec<Shown> {
    let mut shown = Vec::new();
    let mut shell = None::<bool>;
    let mut pending = String::new();
    // An inline code span prose wrapped onto the next line: its text so far.
    let mut open_span = None::<String>;
    for (number, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            open_span = None;
        }
        if let Some(lang) = line.trim_start().strip_prefix("```") {
            shell = match shell {
                Some(_) => None,
                None => Some(matches!(
                    lang.trim(),
                    "" | "sh" | "shell" | "bash" | "console"
                )),
            };
            continue;
        }
        let mut pieces = Vec::new();
        if shell == Some(true) {
            pending.push_str(line.trim_start().trim_start_matches("$ "));
            if pending.ends_with('\\') {
                pending.pop();
                continue;
            }
            pieces.push(std::mem::take(&mut pending));
        } else if shell.is_none() {
            pieces.extend(inline_spans(line, &mut open_span));
        }
        for mut command in pieces.iter().flat_map(|p| commands(p)) {
            let env: Vec<_> = command.iter().map_while(|w| assignment(w)).collect();
            command.drain(..env.len());
            if command.len() > 1 && command[0] == program {
                shown.push(Shown {
                    place: format!("{file}:{}", number + 1),
                    words: command,
                    env,
                });
            }
        }
    }
    shown
}

/// The inline code spans of a prose `line`, a span wrapped from the line before (`open`)
/// included; a span the line leaves open is kept in `open` for the next one.
fn inline_spans(line: &str, open: &mut Option<String>) -> Vec<String> {
    let text = match open.take() {
        Some(before) => format!("`{before} {}", line.trim_start()),
        None => line.to_owned(),
    };
    let parts: Vec<&str> = text.split('`').collect();
    let mut spans: Vec<String> = parts
        .iter()
        .skip(1)
        .step_by(2)
        .map(|s| s.to_string())
        .collect();
    if parts.len().is_multiple_of(2) {
        *open = spans.pop();
    }
    spans
}

pub(crate) fn documents() -> Vec<(String, String)> {
    let mut files = vec!["README.md".to_owned(), "deploy/README.md".to_owned()];
    let mut docs: Vec<String> = std::fs::read_dir(repo("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .map(|p| format!("docs/{}", p.file_name().unwrap().to_string_lossy()))
        .collect();
    docs.sort();
    files.extend(docs);
    files
        .into_iter()
        .map(|f| {
            let text = std::fs::read_to_string(repo(&f)).unwrap();
            (f, text)
        })
        .collect()
}

fn binary(args: &[&str]) -> std::process::Output {
    binary_with(args, &[])
}

/// The binary run with `args` in the repository, with only the `HO_*` variables of `env`.
fn binary_with(args: &[&str], env: &[(String, String)]) -> std::process::Output {
    crate::harness::binary()
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(repo("."))
        .output()
        .unwrap()
}

/// The longest run of leading words the binary takes as a subcommand (`dnssec keygen`).
fn subcommand(words: &[String]) -> Vec<&str> {
    let mut path: Vec<&str> = Vec::new();
    for word in words.iter().skip(1).take(2) {
        let mut longer = path.clone();
        longer.push(word);
        let mut args = vec!["help"];
        args.extend(&longer);
        if word.starts_with('-') || !binary(&args).status.success() {
            break;
        }
        path = longer;
    }
    path
}

#[test]
fn every_command_the_docs_show_is_one_the_binary_takes() {
    let global = String::from_utf8(binary(&["--help"]).stdout).unwrap();
    let mut checked = 0;
    let mut ran = 0;
    for (file, text) in documents() {
        for shown in shown_in(&file, &text, "health-orchestrator") {
            let path = subcommand(&shown.words);
            assert!(
                !path.is_empty(),
                "{}: no such subcommand: {:?}",
                shown.place,
                shown.words
            );
            let mut args = path.clone();
            args.push("--help");
            let help = String::from_utf8(binary(&args).stdout).unwrap();
            for flag in shown.words.iter().filter(|w| w.starts_with("--")) {
                let flag = flag.split('=').next().unwrap();
                let listed =
                    |h: &str| h.contains(&format!("{flag} ")) || h.contains(&format!("{flag}\n"));
                assert!(
                    listed(&help) || listed(&global),
                    "{}: `{}` has no {flag}",
                    shown.place,
                    path.join(" ")
                );
            }
            checked += 1;
            if runs_offline(&path, &shown.words) {
                let args: Vec<&str> = shown.words[1..].iter().map(String::as_str).collect();
                let out = binary_with(&args, &shown.env);
                assert!(
                    out.status.success(),
                    "{}: {:?} {:?}: {}",
                    shown.place,
                    shown.env,
                    shown.words,
                    String::from_utf8_lossy(&out.stderr)
                );
                ran += 1;
            }
        }
    }
    eprintln!("{checked} commands checked, {ran} run");
    assert!(checked >= 20 && ran >= 3, "{checked} checked, {ran} run");
}

/// Whether a shown command runs here, offline, on files the repository holds.
fn runs_offline(path: &[&str], words: &[String]) -> bool {
    match path {
        ["crds"] | ["config-schema"] => words.len() == 2,
        ["check-config"] => words
            .windows(2)
            .filter(|w| w[0] == "--config" || w[0] == "--resource")
            .all(|w| repo(&w[1]).is_file()),
        _ => false,
    }
}

#[test]
fn every_manifest_the_docs_apply_is_here() {
    let mut checked = 0;
    for (file, text) in documents() {
        for shown in shown_in(&file, &text, "kubectl") {
            let w = &shown.words;
            let Some(at) = w
                .iter()
                .position(|x| x == "-k" || x == "-f" || x == "kustomize")
            else {
                continue;
            };
            let Some(target) = w.get(at + 1).filter(|t| t.starts_with("deploy/")) else {
                continue;
            };
            if w[at] == "-f" {
                assert!(repo(target).is_file(), "{}: no {target}", shown.place);
            } else {
                let out = Command::new("kubectl")
                    .arg("kustomize")
                    .arg(repo(target))
                    .output()
                    .expect("kubectl is missing: run the test command (bash .ci/test)");
                assert!(
                    out.status.success(),
                    "{}: kubectl kustomize {target}: {}",
                    shown.place,
                    String::from_utf8_lossy(&out.stderr)
                );
            }
            checked += 1;
        }
    }
    assert!(checked >= 5, "{checked} manifests checked");
}

/// The extraction itself, on a document written here: continued lines, operators,
/// redirections, comments, quotes and inline code.
#[test]
fn an_inline_span_wrapped_onto_the_next_line_is_one_command() {
    let text = "Drain: `curl -X POST -H \"A: b\"\nhttp://x:8080/v1/endpoints/gw-2/drain` takes it out,\n`curl c` too.\n\nA `stray\n\n`curl d`\n";
    let shown: Vec<String> = shown_in("t.md", text, "curl")
        .into_iter()
        .map(|s| format!("{} {}", s.place, s.words.join(" ")))
        .collect();
    assert_eq!(
        shown,
        [
            "t.md:2 curl -X POST -H A: b http://x:8080/v1/endpoints/gw-2/drain",
            "t.md:3 curl c",
            "t.md:7 curl d",
        ]
    );
}

#[test]
fn commands_are_read_as_a_shell_would_split_them() {
    let doc = "Run `health-orchestrator probe 10.0.0.1:80 --timeout 1s` first.\n\
               ```sh\n\
               health-orchestrator check-config --config a.toml && health-orchestrator run \\\n  --config a.toml   # comment\n\
               health-orchestrator crds > deploy/x.yaml\n\
               health-orchestrator probe 'dns://h/x?type=A&contains=1'\n\
               HO_A__B=1s HO_C=x health-orchestrator crds\n\
               ```\n\
               ```toml\nhealth-orchestrator = 1\n```\n";
    let found = shown_in("doc", doc, "health-orchestrator");
    let env: Vec<_> = found.iter().map(|s| s.env.len()).collect();
    assert_eq!(env, [0, 0, 0, 0, 0, 2]);
    assert_eq!(found[5].env[0], ("HO_A__B".to_owned(), "1s".to_owned()));
    let shown: Vec<Vec<String>> = found.into_iter().map(|s| s.words).collect();
    let expected: Vec<Vec<&str>> = vec![
        vec![
            "health-orchestrator",
            "probe",
            "10.0.0.1:80",
            "--timeout",
            "1s",
        ],
        vec!["health-orchestrator", "check-config", "--config", "a.toml"],
        vec!["health-orchestrator", "run", "--config", "a.toml"],
        vec!["health-orchestrator", "crds"],
        vec![
            "health-orchestrator",
            "probe",
            "dns://h/x?type=A&contains=1",
        ],
        vec!["health-orchestrator", "crds"],
    ];
    assert_eq!(shown, expected);
}

/// deploy/README.md's count of alert rules ("all N unit-tested") and every alert the docs name
/// in inline code (`HealthOrchestratorDown`) are the PrometheusRule's.
#[test]
fn the_alerts_the_docs_count_and_name_are_the_rules() {
    let rule =
        std::fs::read_to_string(repo("deploy/kubernetes/monitoring/prometheusrule.yaml")).unwrap();
    let alerts: Vec<&str> = rule
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert: "))
        .map(str::trim)
        .collect();
    let readme = std::fs::read_to_string(repo("deploy/README.md")).unwrap();
    let counted = readme
        .split("all ")
        .skip(1)
        .find_map(|rest| {
            let (word, _) = rest.split_once(" unit-tested")?;
            (!word.is_empty() && word.bytes().all(|b| b.is_ascii_digit())).then_some(word)
        })
        .expect("deploy/README.md says \"all N unit-tested\"");
    assert_eq!(
        counted,
        alerts.len().to_string(),
        "deploy/README.md counts {counted} alerts"
    );
    for (file, text) in documents() {
        for span in text.split('`').skip(1).step_by(2) {
            let alert_like = span.len() > 8
                && span.starts_with(|c: char| c.is_ascii_uppercase())
                && span.chars().all(|c| c.is_ascii_alphanumeric())
                && [
                    "Down", "Slow", "Nodes", "Failing", "Stale", "Burn", "Expiring", "Brake",
                ]
                .iter()
                .any(|end| span.ends_with(end));
            assert!(
                !alert_like || alerts.contains(&span),
                "{file}: no alert {span}"
            );
        }
    }
}
