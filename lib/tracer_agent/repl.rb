# frozen_string_literal: true

module TracerAgent
  # -i: whether the lines typed so far are a whole piece of Ruby, or the client should ask for
  # more lines (a def without its end, an open string or bracket, a heredoc not closed yet).
  module Repl
    # How Ripper says that the text stopped too early. Ripper is the parse.y parser on Ruby 3.1
    # to 3.4 (Prism, which compiles the code on 3.4, words its errors differently), and these
    # words are the same on all of them.
    UNFINISHED = /unexpected end-of-input|meets end of file|anywhere before EOF/

    module_function

    # A text with another kind of syntax error is complete: running it says what is wrong.
    def complete?(text)
      return false if text.match?(/\\\n?\z/) # the last line goes on with the next one

      check = checker.new(text, '(tracer -i)')
      check.parse
      !UNFINISHED.match?(check.error.to_s)
    end

    # A Ripper that keeps the first error: what the parser says after recovering from it proves
    # nothing. Made at the first -i line, not as the agent loads: Ripper is six files, and
    # tracer may load the agent into a busy process, where each file read waits for Ruby's lock.
    def checker
      @checker ||= begin
        require 'ripper'
        Class.new(Ripper) do
          attr_reader :error

          def on_parse_error(message)
            @error ||= message
          end

          def compile_error(message)
            @error ||= message
          end
        end
      end
    end
  end
end
