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

  TOP_APP = File.join(ROOT, 'test', 'apps', 'top_target.rb')
  BARE = { 'RUBYOPT' => nil, 'TRACER_AGENT_INJECT' => nil }.freeze

  # A process of user nobody whose command line ends with calls@TAG; with the agent or bare.
  def nobodys(agent:)
    env = { 'GO' => File.join(@dir, 'never') }.merge(agent ? {} : BARE)
    target("calls@#{@tag}", script: TOP_APP, env: env, agent: agent, prefix: AS_NOBODY)
  end

  def agent_loaded?(pid) = File.read("/proc/#{pid}/maps").include?('/tracer_agent.so')

  # Issue 43: as root, --ps loaded the agent into every user's matching Ruby that never loaded
  # it. Root attaches to another user's process that loaded the agent itself, and leaves the
  # others alone, saying so; --user USER names whose processes get the agent.
  def test_as_root_ps_loads_the_agent_only_into_the_user_it_names
    with = nobodys(agent: true)
    bare = nobodys(agent: false)
    regex = "top_target\\.rb calls@#{@tag}$"
    out, err, status = tracer('--ps', regex, '-e', 'Process.pid')
    assert status.success?, err
    assert_equal "=> #{with.pid}\n", out, 'the one with the agent, alone'

    assert_includes err, "tracer: --ps leaves alone 1 matching process of other users that never " \
                         "loaded tracer_agent (pid #{bare.pid}): --user USER loads it into USER's\n"
    refute agent_loaded?(bare.pid), 'the agent was loaded into a process of another user'

    _, err, status = tracer('--ps', regex, '--user', 'nobody', '-e', 'Process.pid', '--no-inject')
    assert status.success?, err
    refute agent_loaded?(bare.pid), '--no-inject loads nothing'

    out, err, status = tracer('--ps', regex, '--user', 'nobody', '-e', 'Process.uid')
    assert status.success?, err
    nobody = Etc.getpwnam('nobody').uid
    assert_equal ["[#{bare.pid}] => #{nobody}", "[#{with.pid}] => #{nobody}"].sort, out.lines.map(&:chomp).sort
    assert_match(/^\*\*\* \[#{bare.pid}\] loaded tracer_agent into process #{bare.pid} /, err)
    assert agent_loaded?(bare.pid)

    _, err, status = tracer('--ps', regex, '--user', 'root', '-e', '1')
    assert_equal 1, status.exitstatus
    assert_equal "tracer: no process matches #{regex} with tracer_agent loaded\n", err, '--user: no other user\'s'
  end

  def test_user_goes_with_ps_and_names_a_user
    _, err, status = tracer('-p', Process.pid, '--user', 'nobody', '-e', '1')
    assert_equal 2, status.exitstatus
    assert_equal "tracer: --user goes with --ps: it says whose processes --ps looks at\n", err.lines.first
    _, err, status = tracer('--ps', 'x', '--user', 'no-such-user-here', '-e', '1')
    assert_equal 2, status.exitstatus
    assert_equal "tracer: --user no-such-user-here: no such user (a name from /etc/passwd, or a uid)\n", err.lines.first
  end

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
    c.wait_for(/^\*\*\* process #{first[0]}: its method wrappers and hooks are in use by pid #{other.pid} \(tracer -m\); /, stream: :err)
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
