# ps_test.rb: --ps while workers come and go: a Puma-like cluster (target.rb cluster) forks new
# workers and replaces those that die, under --top and under -m alike.
require_relative 'helper'
require 'fileutils'

class PsTest < Minitest::Test
  include TracerTest

  def setup
    super
    @dir = Dir.mktmpdir('tracer-ps-test')
    @spawn = File.join(@dir, 'spawn')
    @tag = "t#{rand(1 << 40)}"
  end

  def teardown
    super
    FileUtils.rm_rf(@dir)
  end

  def cluster
    target('cluster', env: { 'TAG' => @tag, 'SPAWN_FILE' => @spawn })
  end

  def regex = "^cluster-worker-#{@tag}$"

  # The pids of the workers the master has said it forked, in order.
  def workers(master) = master.out.scan(/^worker (\d+)$/).flatten.map(&:to_i)

  def wait_workers(master, n)
    wait_until(message: "#{n} workers in #{master.out}") { workers(master).size >= n }
    workers(master)
  end

  # Forks a worker more, and returns its pid once the master has said so.
  def spawn_worker(master)
    before = workers(master).size
    FileUtils.touch(@spawn)
    wait_workers(master, before + 1).last
  end

  # Kills a worker as an OOM killer would; the master forks its replacement.
  def kill_worker(master, pid)
    before = workers(master).size
    Process.kill('KILL', pid)
    master.wait_for(/^exited #{pid}$/)
    wait_workers(master, before + 1).last
  end

  def snapshots(c)
    c.out.each_line.select { |l| l.end_with?("\n") }.map { |l| JSON.parse(l) }
  end

  def wait_snapshot(c, what)
    wait_until(message: "#{what}; latest table: #{snapshots(c).last.inspect}\n#{c.err}") do
      snap = snapshots(c).last
      snap if snap && yield(snap)
    end
  end

  def work_row(snap) = snap['rows'].find { |r| r['method'] == 'Worker#work' }

  # The first table counts only the first two; a new one joins the header, the table and the
  # PIDS column; a killed one leaves them, its counts staying, while its replacement joins.
  def test_top_follows_workers_that_come_and_go
    m = cluster
    first = wait_workers(m, 2)
    c = client('--ps', regex, '--top', 'calls', '--json', '--interval', '0.2')
    wait_snapshot(c, 'both first workers counting') { |s| s['pids'] == first.sort && work_row(s)&.fetch('pids') == 2 }
    added = spawn_worker(m)
    snap = wait_snapshot(c, "the new worker #{added}") { |s| s['pids'] == (first + [added]).sort && work_row(s)['pids'] == 3 }
    count = work_row(snap)['count']
    replacement = kill_worker(m, first[0])
    c.wait_for(/^\*\*\* process #{first[0]} exited$/, stream: :err)
    live = [first[1], added, replacement].sort
    snap = wait_snapshot(c, "#{first[0]} gone, #{replacement} in") { |s| s['pids'] == live && work_row(s)['pids'] == 3 }
    assert_operator work_row(snap)['count'], :>, count, 'the counts of the dead worker stay'
    c.signal('INT')
    status = c.finish
    assert_equal 0, status.exitstatus, c.err
    live.each { |pid| assert_match(/^\*\*\* detached from process #{pid}$/, c.err) }
    refute_match(/^tracer:/, c.err)
  end

  # A worker that another client traces refuses; a killed one is noted; new ones are traced
  # from their first call on, their lines prefixed with their pid; and the run ends with 0.
  def test_trace_follows_workers_that_come_and_go
    m = cluster
    first = wait_workers(m, 2)
    other = client('-p', first[0], '-m', 'Worker#helper')
    other.wait_for(/^Worker#helper <[\d.]+>$/)
    c = client('--ps', regex, '-m', 'Worker#helper')
    c.wait_for(/^\*\*\* process #{first[0]} is already traced by pid #{other.pid}$/, stream: :err)
    c.wait_for(/^\[#{first[1]}\] Worker#helper <[\d.]+>$/)
    refute_match(/^\[#{first[0]}\]/, c.out)
    added = spawn_worker(m)
    c.wait_for(/^\[#{added}\] Worker#helper <[\d.]+>$/)
    replacement = kill_worker(m, first[1])
    c.wait_for(/^\*\*\* process #{first[1]} exited$/, stream: :err)
    c.wait_for(/^\[#{replacement}\] Worker#helper <[\d.]+>$/)
    c.signal('INT')
    status = c.finish
    assert_equal 0, status.exitstatus, c.err
    refute_match(/^tracer:/, c.err)
    # A call of one worker still open when another worker's line comes is printed open (no
    # duration), and its end later on a line of its own, as the tree printer does for threads.
    assert c.out.lines.all? { |l| l =~ /\A\[(#{first[1]}|#{added}|#{replacement})\] (Worker#helper( <[\d.]+>)?)?\n\z/ }, c.out
    other.signal('INT')
    assert other.finish.success?, other.err
  end

  # Every worker gone at once (a restart): tracer waits for the new ones, then --duration ends
  # the run for all of them with 0. The duration holds the restart, which takes seconds on a
  # loaded machine (4 s did not always: the new workers' lines never came).
  def test_duration_spans_a_restart
    m = cluster
    first = wait_workers(m, 2)
    c = client('--ps', regex, '-m', 'Worker#helper', '--duration', 15)
    first.each { |pid| c.wait_for(/^\[#{pid}\] Worker#helper/) }
    first.each { |pid| Process.kill('KILL', pid) }
    fresh = wait_workers(m, 4).last(2)
    fresh.each { |pid| c.wait_for(/^\[#{pid}\] Worker#helper/) }
    status = c.finish
    assert_equal 0, status.exitstatus, c.err
    fresh.each { |pid| assert_match(/^\*\*\* detached from process #{pid}$/, c.err) }
    assert m.alive?
  end
end
