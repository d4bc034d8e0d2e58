# install_test.rb: putting the wrappers of an app's every method in place, and taking them away:
# what the operator sees meanwhile, and that the process answers the next client at once.
require_relative 'helper'
require 'pty'
require 'tmpdir'

class InstallTest < Minitest::Test
  include TracerTest

  MANY = 40_000

  # A terminal shows how far it has come while the wrappers go in place; then the trace starts.
  def test_progress_on_a_terminal
    t = target('many', env: { 'MANY' => MANY.to_s })
    screen = +''
    r, w, pid = PTY.spawn({ 'TERM' => 'xterm' }, TRACER, '-p', t.pid.to_s, '-f', '-o', '/dev/null', '--duration', '0.5')
    begin
      loop { screen << r.readpartial(4096) }
    rescue EOFError, Errno::EIO
      nil # the client exited
    end
    Process.wait(pid)
    assert $?.success?, screen
    shown = screen[/\r\e\[Kwrapping ([\d,]+) methods in 1 process: \d+%/, 1]
    assert shown || screen.match?(/\r\e\[Kfinding the app's methods in 1 process: \d+%/), screen
    # MANY, and the dozen methods of target.rb's own: it lies under the working directory too.
    assert_includes MANY..MANY + 50, Integer(shown.delete(',')), screen if shown
    assert_match(/\r\e\[K\*\*\* attached to process #{t.pid}/, screen, 'the line is taken away before the next note')
    w.close
  end

  # However a client ends, the process answers the next one within a second: once its trace
  # ran, once it was killed in the middle of putting the wrappers in place, once it was killed
  # while tracing. Nothing of the session is left after.
  def test_the_next_client_is_answered_within_a_second_however_the_last_one_ended
    t = target('many', env: { 'MANY' => MANY.to_s })
    ends = {
      'detached' => ->(c) { c.wait_for(/attached to process/); c.signal('INT'); c.finish },
      'killed while installing' => ->(c) { sleep 0.05; refute_match(/attached to process/, c.err); c.kill },
      'killed while tracing' => ->(c) { c.wait_for(/attached to process/); c.kill },
    }
    ends.each do |how, finish|
      c = client('-p', t.pid, '-f', '-o', '/dev/null')
      finish.call(c)
      start = Time.now
      out, err, status = tracer('-p', t.pid, '-e', 'TracerAgent.stats.values_at(:wrapped, :hooks)')
      took = Time.now - start
      assert status.success?, "#{how}: #{err}"
      assert_equal "=> [0, 0]\n", out, how
      # A second, and a whole tracer run measured from here, which a loaded machine makes slow.
      assert_operator took, :<, 1.0 + 1.5, "#{how}: the next client waited #{took.round(2)} s (tracer itself starts in a few ms)"
    end
  end

  # The find reads the heap's method entries (plan.c) where the probes say it can, on every Ruby
  # of the matrix, and finds exactly the methods that wrap.rb's module-by-module find finds:
  # every shape of method, a plain object's singleton method and a C function's left out. The
  # module-by-module find, which an app gets with TRACER_AGENT_FIND=modules, finds them too. The
  # target goes on calling the methods whose old entries it holds, with their new arity: a
  # wrapper made from an old entry's would raise there, and the target would die.
  def test_the_find_by_method_entries_finds_what_the_modules_find
    find_shapes('entries', {})
  end

  def test_the_find_module_by_module_on_demand
    find_shapes('modules', { 'TRACER_AGENT_FIND' => 'modules' })
  end

  def find_shapes(how, env)
    Dir.mktmpdir do |dir|
      dir = File.realpath(dir)
      t = target('shapes', chdir: dir, env: env)
      out, err, status = tracer('-p', t.pid, '-f', '--filter', dir, '-o', '/dev/null', '--duration', '0.2')
      assert status.success?, "#{out}#{err}"
      check = <<~RUBY
        w = TracerAgent::Wrap
        old = w.modules.flat_map { |m| w.app_methods_of(m, ['#{dir}/'], '#{dir}/', nil).each_slice(6).map { |o, n| "\#{o.inspect}#\#{n}" } }
        w.found_all
        [TracerAgent.stats.values_at(:found_by, :found), old.sort]
      RUBY
      out, err, status = tracer('-p', t.pid, '-e', check)
      assert status.success?, err
      (by, found), old = eval(out.delete_prefix('=> ')) # rubocop:disable Security/Eval
      assert_equal how, by, 'the find went another way: did a Ruby change its method entries? (plan.c)'
      expected = %w[#<Class:Shapes>#hidden_single #<Class:Shapes>#single Shapes#mixed ShapesA#later ShapesA#made
                    ShapesA#plain ShapesA#plain2 ShapesA#plain3 ShapesA#priv ShapesA#prot ShapesA#r ShapesA#redone
                    ShapesA#rw ShapesA#rw= ShapesA#w= ShapesB#plain ShapesD#under ShapesPatch#over]
      # (ShapesB#priv, made public there, is ShapesB's own on Ruby 3.3 and later, not on 3.1.)
      assert_equal expected, old - ['ShapesB#priv'], 'the module-by-module find'
      assert_equal old.size, found, "the find by #{how} found otherwise"
    end
  end

  # A module all of whose classes were collected is wrapped like any other (Ruby 3.1 crashed in
  # Module#prepend there: wrap.c says how it is kept from it), with -m and with -f.
  def test_a_module_whose_classes_are_gone
    t = target('lonely')
    [%w[-m Lonely#lonely], %w[-f]].each do |args|
      c = client('-p', t.pid, *args)
      begin
        c.wait_for(/^Lonely#lonely <[\d.]+>$/)
      rescue RuntimeError => e # once on 3.4+YJIT, the target had gone: say how, with its stderr
        flunk "#{e.message}\n--- the target (#{t.alive? ? 'alive' : t.status}):\n#{t.err}"
      end
      c.signal('INT')
      assert c.finish.success?, c.err
    end
    assert t.alive?, t.err
    refute_match(/BUG|Segmentation/, t.err)
  end

  # A module's wrapper the app took hold of (instance_method) while traced, and calls after the
  # session removed it, on an object that never included the module: the module's method runs.
  # (It raised NoMethodError, super finding nothing, once in a while in the test above: the
  # session could end between the app's instance_method and its bind_call.)
  def test_a_wrapper_held_past_its_session_calls_the_method
    t = target('held')
    c = client('-p', t.pid, '-m', 'Held#held')
    c.wait_for(/attached to process #{t.pid}/, stream: :err)
    t.puts('take')
    t.wait_for(/^took (.*)$/)
    assert_match(/^took #<TracerAgent::Wrappers of Held>$/, t.out, 'the app did not get the wrapper')
    c.signal('INT')
    assert c.finish.success?, c.err
    t.puts('call')
    t.wait_for(/^held returned /)
    assert_match(/^held returned 2$/, t.out, t.err)
    assert t.alive?, t.err
  end

  # --duration counts from when the wrappers are in place, one process or several (--ps): the
  # time it took to put them there is no tracing. (From when the line came: a loaded machine can
  # keep this test from seeing it for a while, and from seeing the end.)
  def test_duration_counts_from_the_start_of_tracing
    t = target('many', env: { 'MANY' => MANY.to_s })
    [['-p', t.pid.to_s], ['--ps', "target\\.rb many$"]].each do |how|
      c = client(*how, '-f', '-o', '/dev/null', '--duration', '1')
      c.wait_for(/attached to process #{t.pid}/)
      assert c.finish.success?, c.err
      assert_operator c.now - c.came_at(/attached to process #{t.pid}/), :>=, 0.95, "#{how.first}: traced for 1 s once in place"
    end
  end

  # With --ps, a --duration shorter than the install (40,000 methods take longer than 0.2 s
  # here, and seconds on a busy machine) does not run out while the wrappers go in place: the
  # process is traced, then for that long.
  def test_ps_duration_shorter_than_the_install
    t = target('many', env: { 'MANY' => MANY.to_s })
    c = client('--ps', "target\\.rb many$", '-f', '-o', '/dev/null', '--duration', '0.2')
    c.wait_for(/attached to process #{t.pid}/)
    assert c.finish.success?, c.err
    assert_operator c.now - c.came_at(/attached to process #{t.pid}/), :>=, 0.15, 'traced for 0.2 s once in place'
    assert_match(/detached from process #{t.pid}/, c.err)
  end

  # With --ps, --duration counts from when every process found is traced, not the first: one
  # worker in place sooner than another (a fresh Puma worker on Ruby 3.3 first finishes the
  # sweep left from its preloader's last GC) still gets its own --duration of tracing.
  def test_ps_duration_waits_for_the_slowest_install
    small = target('many', env: { 'MANY' => '100' })
    big = target('many', env: { 'MANY' => MANY.to_s })
    c = client('--ps', "target\\.rb many$", '-f', '-o', '/dev/null', '--duration', '0.2')
    c.wait_for(/attached to process #{small.pid}/)
    c.wait_for(/attached to process #{big.pid}/)
    assert c.finish.success?, c.err
    assert_operator c.now - c.came_at(/attached to process #{big.pid}/), :>=, 0.15, "the bigger one traced for 0.2 s once in place: #{c.err}"
    assert_operator c.err.index("attached to process #{small.pid}"), :<, c.err.index("attached to process #{big.pid}"),
                    'the smaller one was in place first'
    [small, big].each { |t| assert_match(/detached from process #{t.pid}/, c.err) }
  end
end
