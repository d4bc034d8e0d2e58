# demo_test.rb: `make demo`'s script runs, and every command it shows can be pasted into a shell.
require_relative 'helper'

class DemoTest < Minitest::Test
  include TracerTest

  # What sh makes of a printed command line: its words.
  def words(line)
    out, err, status = Open3.capture3('sh', '-c', "printf '%s\\0' #{line}")
    assert status.success?, "sh cannot read '#{line}': #{err}"
    out.split("\0")
  end

  def test_demo_commands_paste_as_they_ran
    # [path, argv0]: a lone string with a space in it (the checkout's path) would be split.
    demo = File.join(ROOT, 'script', 'demo')
    out, err, status = Open3.capture3({ 'RUBY' => RUBY }, [demo, demo], chdir: ROOT)
    assert status.success?, "script/demo: #{err}\n#{out}"
    pid = out[/^example app started: pid (\d+)$/, 1] or flunk("no pid in:\n#{out}")
    commands = out.scan(/^\$ (.*)$/).flatten
    assert_equal [
      ['client/tracer', '-p', pid, '-m', 'Order#total', 'Catalog.price(name)', '--duration', '0.5'],
      ['client/tracer', '-p', pid, '-e', '[RUBY_VERSION, Catalog::PRICES.size, Thread.list.size]'],
      ['client/tracer', '-p', pid, '--backtraces'],
    ], commands.map { |c| words(c) }
    assert_match(/^Order#total\n  Catalog\.price\(name="apple"\) <[\d.]+>$/, out)
    assert_match(/^=> \["#{Regexp.escape(RUBY_VERSION)}", 3, \d+\]$/, out)
    assert_match(/^main \(sleep\)\n  examples\/shop\.rb:\d+:in /, out)
    # Where tracer is after it, since the README's commands run it as `tracer`.
    assert_match(%r{^tracer is client/tracer in this checkout\. On the PATH: make install}, out)
  end

  # Quoting itself, on what a shell would break at.
  def test_quoting
    demo = File.join(ROOT, 'script', 'demo')
    quote = File.read(demo)[/^quote\(\) \{\n.*?^\}\n/m] or flunk('no quote() in script/demo')
    args = ['plain', 'A#b', 'Catalog.price(name)', "it's", '', '#x', '~', 'a b', '$HOME', '`x`', 'a\\b', '"q"', '*']
    line, err, status = Open3.capture3('sh', '-c', "#{quote}for a in \"$@\"; do printf '%s ' \"$(quote \"$a\")\"; done",
                                       'sh', *args)
    assert status.success?, err
    assert_equal args, words(line)
    assert_equal 'plain A#b ', line[0, 10]
  end
end
