import Hummingbird

/// One small stylesheet: system colours in both schemes, a single column
/// that reflows at any width (400 % zoom is a 320 px wide window), visible
/// focus for keyboard use.
enum Stylesheet {
    static let text = """
        :root { color-scheme: light dark; --fg: #1b1b1b; --bg: #ffffff; --muted: #595959; --line: #d0d0d0;
          --accent: #0b57d0; --danger: #b3261e; --ok: #146c2e; --chip: #eef1f5; }
        @media (prefers-color-scheme: dark) {
          :root { --fg: #e8e8e8; --bg: #151515; --muted: #b0b0b0; --line: #3a3a3a; --accent: #8ab4f8;
            --danger: #f2b8b5; --ok: #9ad5a4; --chip: #262a30; } }
        * { box-sizing: border-box; }
        body { margin: 0; font: 1rem/1.5 system-ui, sans-serif; color: var(--fg); background: var(--bg); }
        header, main { max-width: 72rem; margin: 0 auto; padding: 0.5rem 1rem; }
        header { border-bottom: 1px solid var(--line); }
        .brand { font-weight: 600; margin: 0.25rem 0; }
        nav ul { list-style: none; display: flex; flex-wrap: wrap; gap: 0.25rem 1rem; margin: 0; padding: 0; }
        a { color: var(--accent); }
        a[aria-current] { font-weight: 700; text-decoration: none; }
        a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, main:focus-visible {
          outline: 3px solid var(--accent); outline-offset: 2px; }
        .skip { position: absolute; left: -100vw; }
        .skip:focus { left: 1rem; top: 0.5rem; background: var(--bg); padding: 0.25rem; }
        h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 1.5rem; }
        table { border-collapse: collapse; width: 100%; }
        th, td { text-align: left; padding: 0.35rem 0.5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
        .scroll { overflow-x: auto; }
        code, .name { font-family: ui-monospace, monospace; overflow-wrap: anywhere; }
        .muted { color: var(--muted); }
        img.preview { vertical-align: middle; margin-right: 0.5em; border: 1px solid var(--muted); image-rendering: auto; }
        .state-revoked { color: var(--danger); font-weight: 600; }
        .state-active { color: var(--ok); font-weight: 600; }
        .error { color: var(--danger); font-weight: 600; }
        .notice { border-left: 4px solid var(--accent); padding: 0.25rem 0.75rem; }
        form.inline { display: inline; margin: 0; }
        button { font: inherit; padding: 0.2rem 0.8rem; border: 1px solid var(--line); border-radius: 0.3rem;
          background: var(--chip); color: var(--fg); cursor: pointer; }
        button.danger { border-color: var(--danger); color: var(--danger); }
        label { margin-right: 0.5rem; } input, select { font: inherit; max-width: 100%; }
        meter { width: 8rem; max-width: 50%; vertical-align: middle; }
        meter.denials::-webkit-meter-suboptimum-value, meter.denials::-webkit-meter-optimum-value { background: var(--danger); }
        meter.denials:-moz-meter-sub-optimum::-moz-meter-bar { background: var(--danger); }
        .filters { display: flex; flex-wrap: wrap; gap: 0.5rem 1rem; align-items: end; }
        @media (max-width: 40rem) {
          table, thead, tbody, tr, th, td { display: block; }
          thead { position: absolute; left: -100vw; }
          tr { border-bottom: 2px solid var(--line); padding: 0.25rem 0; }
          td { border: none; padding: 0.1rem 0; }
          td[data-label]::before { content: attr(data-label) ": "; color: var(--muted); } }

        """

    static func response() -> Response {
        Response(
            status: .ok, headers: [.contentType: "text/css; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(string: text)))
    }
}
