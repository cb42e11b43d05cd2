//! The generated tree the collector and explore benchmarks share.

use std::path::Path;

type Error = Box<dyn std::error::Error>;

/// A deterministic tree of `n` source-like files: 100 top folders of 10 subfolders, mostly code
/// of 0.2–8 KB, with some docs, config, lock files and logs, and a .gitignore.
pub fn generate_tree(root: &Path, n: usize) -> Result<(), Error> {
    const LINES: &[&str] = &[
        "    let value = compute(input, offset)?;",
        "    if value > threshold { return Err(Error::TooLarge(value)); }",
        "def handle_request(self, request, *args, **kwargs):",
        "        return self.cache.get(key, default=None)",
        "// Walks the tree and returns the files in priority order.",
        "    for (i, item) in items.iter().enumerate() {",
        "        total += item.len() * 3 + 17;",
        "    }",
        "}",
        "",
        "import { useState, useEffect } from 'react';",
        "  const [state, setState] = useState(0x1f);",
        "#include <stdio.h>",
        "static int counter_42 = 0;",
        "SELECT id, name FROM users WHERE created_at > '2024-01-01';",
    ];
    let exts = [
        "rs", "py", "ts", "c", "go", "rs", "py", "md", "toml", "json", "lock", "log", "rs", "py",
        "java", "txt",
    ];
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let _ = std::fs::remove_dir_all(root);
    std::fs::create_dir_all(root)?;
    std::fs::write(root.join(".gitignore"), "*.tmp\n")?;
    for i in 0..n {
        let dir = root.join(format!("pkg{:02}/mod{}", i % 100, (i / 100) % 10));
        if i < 1000 {
            std::fs::create_dir_all(&dir)?;
        }
        let ext = exts[(next() % exts.len() as u64) as usize];
        let size = 200 + (next() % 7800) as usize;
        let mut body = String::with_capacity(size + 80);
        while body.len() < size {
            body.push_str(LINES[(next() % LINES.len() as u64) as usize]);
            body.push('\n');
        }
        std::fs::write(dir.join(format!("file{i:06}.{ext}")), body)?;
    }
    std::fs::write(root.join(".complete"), "")?;
    Ok(())
}
