//! Shell completions and man pages, installed as `--help` says.

use std::process::Command;

use forge_tests::harness::bin;

fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(bin(program)).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// What bash offers after `words`, with the script `program completions
/// bash` printed loaded as the help says to install it.
fn bash_offers(program: &str, words: &[&str]) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let script = dir.path().join(program);
    std::fs::write(&script, run(program, &["completions", "bash"])).unwrap_or_else(|e| panic!("{e}"));
    let line = words.join(" ");
    let probe = format!(
        "source {script}; COMP_WORDS=({line}); COMP_CWORD={}; COMP_LINE='{line}'; COMP_POINT=${{#COMP_LINE}}; \
         _{program} {program} '{}' '{}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        words.len() - 1,
        words[words.len() - 1],
        words[words.len() - 2],
        script = script.display(),
    );
    let out = Command::new("bash").arg("-c").arg(probe).output().unwrap_or_else(|e| panic!("bash: {e}"));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_string).collect()
}

#[test]
fn bash_completes_forgectl_subcommands_and_flags_from_the_installed_script() {
    let offered = bash_offers("forgectl", &["forgectl", "re"]);
    for word in ["recall", "recover", "rewind"] {
        assert!(offered.iter().any(|w| w == word), "{word} in {offered:?}");
    }
    let flags = bash_offers("forgectl", &["forgectl", "send", "--co"]);
    assert_eq!(flags, ["--continue"]);
    let forge = bash_offers("forge", &["forge", "--n"]);
    assert!(forge.iter().any(|w| w == "--new"), "{forge:?}");
}

#[test]
fn zsh_and_fish_scripts_and_man_pages_are_made_from_the_same_definitions() {
    assert!(run("forgectl", &["completions", "zsh"]).starts_with("#compdef forgectl"));
    assert!(run("forgectl", &["completions", "fish"]).contains("complete -c forgectl"));
    assert!(run("forge", &["completions", "zsh"]).starts_with("#compdef forge"));
    let page = run("forgectl", &["man"]);
    assert!(page.contains(".TH forgectl 1") && page.contains("rewind"), "{page}");
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    run("forgectl", &["man", "--out-dir", &dir.path().display().to_string()]);
    let send = std::fs::read_to_string(dir.path().join("forgectl-send.1")).unwrap_or_default();
    assert!(send.contains("forgectl send") && send.contains("\\-\\-continue"), "{send}");
    assert!(run("forge", &["man"]).contains(".TH forge 1"));
}
