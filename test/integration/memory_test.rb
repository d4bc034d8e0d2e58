# memory_test.rb: --memory's report holds every section, with numbers that match the process.
require_relative 'helper'

class MemoryTest < Minitest::Test
  include TracerTest

  PROBES = 20_000

  UNITS = { 'B' => 1, 'KiB' => 1 << 10, 'MiB' => 1 << 20, 'GiB' => 1 << 30 }.freeze

  # "812.3 MiB" as bytes.
  def bytes(text)
    m = text.match(/\A([\d.]+) (B|KiB|MiB|GiB)\z/) or flunk("not a size: #{text.inspect}")
    (m[1].to_f * UNITS.fetch(m[2])).round
  end

  def number(text) = Integer(text.delete(','))

  # The rows of the section whose title starts with title: each row's columns (2+ spaces apart).
  def section(report, title)
    block = report.split("\n\n").find { |b| b.start_with?(title) } or flunk("no #{title} section in:\n#{report}")
    block.lines(chomp: true)[2..].map { |l| l.strip.split(/\s{2,}/) }
  end

  def vm_rss(pid) = File.read("/proc/#{pid}/status")[/^VmRSS:\s+(\d+) kB/, 1].to_i * 1024

  def test_report_of_a_process
    t = target('memory', env: { 'PROBES' => PROBES.to_s })
    out, err, status = tracer('-p', t.pid, '--memory')
    rss = vm_rss(t.pid)
    assert status.success?, err
    assert_match(/\Amemory of process #{t.pid} \(ruby #{Regexp.escape(RUBY_VERSION)}\) at .*, seen by a copy of it \(fork\) that walked its heap in [\d.]+ s\n/, out)

    process = section(out, 'Process (').to_h { |what, size, *| [what, bytes(size)] }
    assert_in_delta rss, process.fetch('RSS'), rss * 0.1, 'RSS as /proc/PID/status says it'
    assert_operator process.fetch('peak RSS'), :>=, process.fetch('RSS')
    assert_operator process.fetch('private'), :>, process.fetch('RSS') / 2, 'the copy shares nothing yet'

    maps = section(out, 'Mappings (').to_h { |kind, n, size, res| [kind, [n, bytes(size), bytes(res)]] }
    assert_equal ['Ruby heap', 'malloc heap', 'stacks', 'other anonymous', 'libraries', 'other files', 'kernel', 'total'], maps.keys
    assert_in_delta rss, maps['total'][2], rss * 0.1
    assert_in_delta maps['total'][2], maps.except('total').sum { |_, (_, _, res)| res }, maps['total'][2] * 0.01, 'kinds add up'
    assert_operator number(maps['Ruby heap'][0][/[\d,]+/]), :>, 0
    assert_operator maps['libraries'][2], :>, 0

    gc = section(out, 'GC (GC.stat').to_h { |key, value, *| [key, value] }
    assert_operator number(gc.fetch('count')), :>, 0
    assert_operator number(gc.fetch('heap_live_slots')), :>, PROBES

    types = section(out, 'Objects by type').to_h { |type, n, *| [type, number(n)] }
    assert_operator types.fetch('T_OBJECT'), :>=, PROBES
    assert_operator types.fetch('T_STRING'), :>=, 50_000

    classes = section(out, 'Objects by class').to_h { |name, n, size| [name, [number(n), bytes(size)]] }
    assert_equal PROBES, classes.fetch('MemoryProbe')[0], 'as many as the app made'
    assert_operator classes.fetch('MemoryProbe')[1], :>=, PROBES * 40
    assert_equal 20, classes.size

    string = section(out, 'Largest strings').first
    assert_equal ['String', '5,242,880'], string[0, 2]
    assert_operator bytes(string[2]), :>=, 5 << 20
    assert_equal "\"#{'a' * 60}\"...", string[3]
    assert_equal ['Array', '100,000'], section(out, 'Largest arrays').first[0, 2]
    assert_equal '[0, 1, 2, 3, ...]', section(out, 'Largest arrays').first[3]
    hash = section(out, 'Largest hashes').first
    assert_equal ['Hash', '50,000'], hash[0, 2]
    assert_equal '{1 => "1", 2 => "2", 3 => "3", 4 => "4", ...}', hash[3]

    # The copy is gone, reaped; the process goes on.
    assert t.alive?
    assert_equal "=> []\n", tracer('-p', t.pid, '-e', 'Dir.children("/proc/self/task").map { |i| File.read("/proc/self/task/#{i}/children") }.join.split').first
  end
end
