# failures.rb STAGE LOG: what `make test` prints at its end for a stage that failed: each
# failed test's name and the start of its message, read from the stage's log, so that the last
# lines of a CI log say what broke (the whole log stays in LOG).
LINES = 4      # of one failure's message
WIDTH = 240    # characters of one line
TAIL = 12      # lines of a log in which no failure is named

def clip(line)
  line = line.chomp
  line.size > WIDTH ? "#{line[0, WIDTH]}... (#{line.size} characters)" : line
end

# minitest's report: "  N) Failure:" or "  N) Error:", the test (and where it failed), the
# message, a blank line; then the counts. Where railties is installed (Redmine's setup puts it
# there), minitest loads its plugin, which prints each as it comes ("Failure:", no number) and
# no list at the end: either is read, each test once.
def integration(log)
  blocks = log.scan(/^(?: +\d+\) )?(Failure|Error):\n(.*?)(?:\n\n|\z)/m).uniq { |_, block| block.lines.first }
  found = blocks.map do |kind, block|
    name, *message = block.lines
    message = message.reject { |l| l.start_with?('    ') && kind == 'Error' && !l.include?('/test/') }
    ["#{clip(name.sub(/:\s*\z/, ''))} (#{kind.downcase})", *message.first(LINES).map { |l| "    #{clip(l)}" }]
  end
  found += log.lines.grep(/^  SKIPPED /).map { |l| ["#{clip(l.strip)} (skipped)"] }
  counts = log[/^\d+ runs, \d+ assertions, .*$/]
  [found, counts && "  #{counts}"]
end

# test/unit/test.h's harness: "suite NAME", the note of the checks, then "FAILED: ..." and, for
# strings, want and got; each binary (plain, then ASan/UBSan) ends with "N passed, N failed".
def unit(log)
  suite = note = nil
  found = []
  log.each_line do |l|
    case l
    when /^suite (\S+)$/ then suite, note = Regexp.last_match(1), nil
    when /^  (\S.*)$/ then note = Regexp.last_match(1)
    when /^FAILED: (.*)$/ then found << ["unit #{suite}: #{clip(note.to_s)}", "    FAILED: #{clip(Regexp.last_match(1))}"]
    when /(ERROR: \w+Sanitizer|runtime error:|SUMMARY: \w+Sanitizer)/ then found << ["unit: #{clip(l)}"]
    end
  end
  counts = log.scan(/^\d+ passed, \d+ failed$/)
  [found, counts.empty? ? nil : "  #{counts.join('; ')}"]
end

# test/fuzz/run: "fuzz: TARGET: ..." for a crash or a regression that crashes again, and what
# the sanitizer said.
def fuzz(log)
  found = log.lines.grep(/^fuzz: \S+: |^SUMMARY: |runtime error:/).map { |l| [clip(l)] }
  [found, nil]
end

stage, path = ARGV
log = File.exist?(path.to_s) ? File.read(path, mode: 'rb').force_encoding('UTF-8').scrub : ''
found, counts = { 'test-integration' => :integration, 'test-unit' => :unit, 'fuzz-ci' => :fuzz }
                .fetch(stage) { abort "failures.rb: no stage #{stage}" }.then { |m| send(m, log) }
puts "#{stage} failed#{counts ? ":#{counts.strip.prepend(' ')}" : ''}"
if found.empty?
  puts "  no failed test named in its log (#{path}); its last lines:"
  log.lines.last(TAIL).each { |l| puts "    #{clip(l)}" }
else
  found.each { |lines| lines.each_with_index { |l, i| puts(i.zero? ? "  #{l.strip}" : l) } }
end
