import ArgumentParser
import Foundation

/// `scopefs --generate-completion-script bash`: the argument parser's
/// script, with `PROVIDER:RELPATH` words made whole (issue 31). Bash splits
/// the word being completed at every `:` (COMP_WORDBREAKS), so the parser's
/// function would see `local`, `:`, `No` as three arguments and complete
/// none of them. The wrapper joins the pieces back before it runs that
/// function, and hands bash only what follows the last colon, which is
/// the part bash replaces. zsh and fish keep words whole already.
enum CompletionScripts {
    /// The script to print instead of the parser's, or nil to let the
    /// parser answer (another shell, or not a request for a script).
    static func replacement(for arguments: [String], environment: [String: String]) -> String? {
        let shell: String?
        switch arguments.count {
        case 1 where arguments[0] == "--generate-completion-script":
            // As the parser does: the shell the user runs.
            shell = environment["SHELL"].map { ($0 as NSString).lastPathComponent }
        case 1 where arguments[0].hasPrefix("--generate-completion-script="):
            shell = String(arguments[0].dropFirst("--generate-completion-script=".count))
        case 2 where arguments[0] == "--generate-completion-script":
            shell = arguments[1]
        default:
            shell = nil
        }
        guard shell == "bash" else { return nil }
        return bash(ScopeFSCommand.completionScript(for: .bash))
    }

    /// The parser's bash script with its `complete` line replaced by the
    /// wrapper's; unchanged if that line is not found (the test of colon
    /// completions then fails, naming the parser's new layout).
    static func bash(_ generated: String) -> String {
        let pattern = /\ncomplete -o filenames -F (\S+) scopefs\n?$/
        guard let match = generated.firstMatch(of: pattern) else { return generated }
        let function = String(match.1)
        return String(generated[..<match.range.lowerBound]) + "\n" + wrapper(calling: function)
    }

    private static func wrapper(calling function: String) -> String {
        """
        # ScopeFS: a PROVIDER:RELPATH word reaches completion in pieces
        # (`local`, `:`, `No`); join the pieces the line has no blank between,
        # complete the whole word, and give bash back what follows its last
        # colon. A provider id or a folder completed alone takes no space
        # after it, so the path goes on; names are quoted as file names.
        \(function)_whole_words() {
            local -a whole=()
            local -i cword=0 index
            local rest="${COMP_LINE:0:COMP_POINT}" word glued
            for index in "${!COMP_WORDS[@]}"; do
                word="${COMP_WORDS[index]}"
                glued=false
                if [[ "${rest}" != [[:space:]]* && ${#whole[@]} -gt 0 ]]; then
                    [[ "${word}" == :* || "${whole[-1]}" == *: ]] && glued=true
                fi
                rest="${rest##+([[:space:]])}"
                rest="${rest#"${word}"}"
                if "${glued}"; then
                    whole[-1]+="${word}"
                else
                    whole+=("${word}")
                fi
                [[ "${index}" -eq "${COMP_CWORD}" ]] && cword=$((${#whole[@]} - 1))
            done
            COMP_WORDS=("${whole[@]}")
            COMP_CWORD="${cword}"
        }

        \(function)_with_colons() {
            local state
            state="$(shopt -p extglob)"
            shopt -s extglob
            local -a COMP_WORDS=("${COMP_WORDS[@]}")
            local COMP_CWORD="${COMP_CWORD}"
            \(function)_whole_words
            eval "${state}"
            local -r whole_word="${COMP_WORDS[COMP_CWORD]}"
            \(function) "${1}" "${whole_word}" "${COMP_WORDS[COMP_CWORD - 1]}"
            if [[ "${whole_word}" == *:* && "${COMP_WORDBREAKS}" == *:* ]]; then
                # Quoted here, with %q: bash's own quoting of a name put after
                # a colon leaves `$` and backquotes bare, and a file named
                # `a`reboot`` would run once the line is.
                local -r before_last_colon="${whole_word%"${whole_word##*:}"}"
                local -i reply
                for reply in "${!COMPREPLY[@]}"; do
                    printf -v 'COMPREPLY[reply]' '%q' "${COMPREPLY[reply]#"${before_last_colon}"}"
                done
                compopt +o filenames
            fi
            if [[ ${#COMPREPLY[@]} -eq 1 && "${COMPREPLY[0]}" == *: ]]; then
                # A provider id: as a file name, bash would quote its colon.
                compopt +o filenames -o nospace
            elif [[ ${#COMPREPLY[@]} -eq 1 && "${COMPREPLY[0]}" == */ ]]; then
                compopt -o nospace
            fi
        }

        complete -o filenames -F \(function)_with_colons scopefs

        """
    }
}
