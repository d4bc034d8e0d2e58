# gc_test.rb: --gc, garbage collections in traces and in --top, against a target whose Gc#full
# runs exactly one major collection (GC.start) per call and whose Gc#churn makes minor ones.
require_relative 'helper'

class GcTest < Minitest::Test
  include TracerTest

  FULL = /^Gc#full <[\d.]+>$/

  def trace(t, *args, until_re:)
    c = client('-p', t.pid, *args)
    c.wait_for(until_re)
    c.signal('INT')
    status = c.finish
    assert status.success?, "exit #{status.exitstatus}: #{c.err}"
    [c.out, c.err]
  end

  # Each complete Gc#full holds the major collection it forced, one level in, with its pause;
  # Gc#churn's allocations show minor ones, each with why it ran.
  def test_collections_in_a_trace
    t = target('gc')
    out, err = trace(t, '-m', 'Gc#full', 'Gc#churn', '--gc', '--stats',
                     until_re: /#{FULL}.*#{FULL}.*^Gc#churn <[\d.]+>$/m)
    blocks = out.scan(/^Gc#full\n(.*?)^Gc#full <[\d.]+>$/m).map(&:first)
    assert_operator blocks.size, :>=, 2, out
    blocks.each do |b|
      assert_equal 1, b.scan(/^  GC major \(force\) <\d+\.\d{9}>$/).size, "one forced major GC inside Gc#full:\n#{b}"
    end
    assert_match(/^  GC minor \((newobj|malloc)\) <\d+\.\d{9}>$/, out)
    assert_empty out.lines.grep(/GC/).grep_v(/^(  )?GC (major|minor)( \(\w+\))? <\d+\.\d{9}>$/), out
    sent, received = err[/(\d+) events sent, (\d+) received/].scan(/\d+/)
    assert_equal sent, received, err
  end

  # The lines inside each Gc#window are the collections GC.count counted in it, which
  # Gc#report shows next.
  def test_collections_match_gc_count
    t = target('gc')
    out, = trace(t, '-m', 'Gc#window', 'Gc#report(delta)', '--gc',
                 until_re: /(^Gc#window <[\d.]+>\nGc#report\(delta=\d+\).*){3}/m)
    windows = out.scan(/^Gc#window\n(.*?)^Gc#window <[\d.]+>\nGc#report\(delta=(\d+)\)/m)
    assert_operator windows.size, :>=, 3, out
    windows.each do |inside, delta|
      assert_operator Integer(delta), :>=, 2, 'churn collects at least once, then GC.start'
      assert_equal Integer(delta), inside.lines.grep(/^  GC (major|minor) /).size, "GC.count's delta is #{delta}:\n#{inside}"
    end
  end

  def test_no_collections_without_the_option
    t = target('gc')
    out, = trace(t, '-m', 'Gc#full', until_re: /#{FULL}.*#{FULL}/m)
    refute_match(/GC/, out)
  end

  # Every collection of the window counts: at least the one each counted Gc#full forced. Tables
  # until one has a Gc#full and a minor collection: a round of the target's loop takes a good
  # part of a second of CPU on a loaded machine, which a fixed --duration 1 could miss.
  def test_top_counts_collections
    t = target('gc')
    c = client('-p', t.pid, '--top', 'calls', '--gc', '--json', '--interval', '0.2')
    snap = wait_until(message: 'a table with Gc#full and a minor collection') do
      c.out.lines.grep(/\n\z/).reverse_each.lazy.map { |l| JSON.parse(l) }.find do |s|
        s['rows'].any? { |r| r['method'] == 'Gc#full' } && s['gc'] && s['gc']['count'] > s['gc']['major']
      end
    end
    c.signal('INT')
    assert c.finish.success?, c.err
    full = snap['rows'].find { |r| r['method'] == 'Gc#full' }
    gc = snap['gc']
    assert_operator full['count'], :>=, 1
    assert_operator gc['major'], :>=, full['count'], snap.inspect
    assert_operator gc['count'], :>, gc['major'], 'Gc#churn made minor collections too'
    assert_operator gc['pause_ms'], :>, 0
    out, err, status = tracer('-p', t.pid, '--top', 'calls', '--json', '--duration', '0.2')
    assert status.success?, err
    refute JSON.parse(out.lines.last).key?('gc')
  end

  # Tables until one has rows: at load the one table of a --duration 0.5 run had none yet
  # ("no row: nothing counted ... so far" under the GC line).
  def test_top_text_has_a_gc_line
    t = target('gc')
    _, err, status = run_until('-p', t.pid, '--top', 'calls', '--gc', '--interval', '0.2',
                               /^tracer --top calls .*\nGC: \d+ in [\d.]+s \(\d+ major\), \d+ ms paused \([\d.]+%\)  since the start: \d+ \(\d+ major\), [\d.]+s paused\n\nFILENAME /)
    assert status.success?, err
  end

  def test_gc_alone_is_a_usage_error
    out, err, status = tracer('-p', Process.pid, '-e', '1', '--gc')
    assert_equal 2, status.exitstatus
    assert_equal "tracer: --gc goes with tracing (-m, -c, -f, -s) or --top\nTry 'tracer --help' for more information.\n", err
    assert_empty out
  end
end
