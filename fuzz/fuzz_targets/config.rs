//! Configuration: any JSON text is read and validated, or refused with its
//! issues, and no issue holds a secret's value.
#![no_main]

use libfuzzer_sys::fuzz_target;
use resilient_llm::gateway::Setup;
use resilient_llm::Config;

const SECRET: &str = "sk-fuzz-config-secret-0123456789";

fuzz_target!(|input: &[u8]| {
    let Ok(json) = std::str::from_utf8(input) else {
        return;
    };
    if json.contains(SECRET) {
        return;
    }
    let secret = |name: &str| (!name.is_empty() && name.len() < 64).then(|| SECRET.to_string());
    if let Ok(config) = Config::parse(json) {
        if let Err(e) = config.validate(&secret, &["custom"]) {
            assert!(!e.issues.is_empty(), "a refusal without an issue");
            assert!(!e.to_string().contains(SECRET), "an issue holds a secret");
        }
    }
    if let Err(e) = Setup::load(Some(json), &secret) {
        assert!(!e.to_string().contains(SECRET), "an issue holds a secret");
    }
});
