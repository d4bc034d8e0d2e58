# yjit_test.rb: targets run with the JIT the suite runs with, and no mode turns it off: YJIT
# when make test-rubies runs it with RUBY_YJIT_ENABLE=1 (3.4 and 4.0 built with YJIT), ZJIT
# with RUBY_ZJIT_ENABLE=1 (4.0), neither otherwise; in a Ruby::Box with RUBY_BOX=1 (4.0).
require_relative 'helper'

class YjitTest < Minitest::Test
  include TracerTest

  EXPECTED = ENV['RUBY_YJIT_ENABLE'] == '1'
  EXPECTED_ZJIT = ENV['RUBY_ZJIT_ENABLE'] == '1'
  MODES = [%w[-m Worker#work(x)], %w[-m Hash#key?], %w[-f], %w[-s 1], %w[--top calls --json],
           %w[--top time --json], %w[--top objects --json], %w[-f --all --yes]].freeze

  # [YJIT on, ZJIT on], as the target says.
  def jits(t)
    out, err, status = tracer('-p', t.pid, '-e', '[!!(defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?), ' \
                                                 '!!(defined?(RubyVM::ZJIT) && RubyVM::ZJIT.enabled?)]')
    assert status.success?, err
    out.scan(/true|false/).map { |b| b == 'true' }
  end

  def test_targets_run_with_yjit_as_the_suite_does_and_every_mode_leaves_it_on
    t = target('work')
    assert_equal [EXPECTED, EXPECTED_ZJIT], jits(t),
                 "RUBY_YJIT_ENABLE=#{ENV['RUBY_YJIT_ENABLE'].inspect} RUBY_ZJIT_ENABLE=#{ENV['RUBY_ZJIT_ENABLE'].inspect}"
    MODES.each do |args|
      _, err, status = tracer('-p', t.pid, *args, '--duration', '0.3')
      assert status.success?, "#{args.join(' ')}: #{err}"
      assert_equal [EXPECTED, EXPECTED_ZJIT], jits(t), "the JITs after #{args.join(' ')}"
    end
  end

  # YJIT's counts: [code thrown away, methods compiled] (nil without YJIT).
  def yjit_counts(t)
    out, err, status = tracer('-p', t.pid, '-e', 's = defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled? && ' \
                                                 'RubyVM::YJIT.runtime_stats; s ? [s[:invalidation_count], s[:compiled_iseq_count]] : []')
    assert status.success?, "#{out}#{err}"
    counts = out.scan(/\d+/).map { |n| Integer(n) }
    counts.empty? ? nil : counts
  end

  # The sampling profiler changes no method and turns no hook on: with YJIT, attaching it,
  # sampling at 1 kHz and detaching throws no compiled code away and compiles nothing new (once
  # the target's own code is all compiled: the counts hold still for a second first).
  def test_profile_leaves_the_jit_code_alone
    t = target('work')
    before = nil
    wait_until(message: 'YJIT\'s counts holding still for a second') do
      a = yjit_counts(t)
      sleep 1
      before = yjit_counts(t)
      a == before
    end
    assert_equal EXPECTED, !before.nil?, 'YJIT\'s counts are there when YJIT is on, and only then'
    %w[cpu wall].each do |clock|
      _, err, status = tracer('-p', t.pid, '--profile', clock, '--hz', '1000', '--duration', '1')
      assert status.success?, "--profile #{clock}: #{err}"
    end
    after = yjit_counts(t)
    if EXPECTED
      assert_equal before, after, '[invalidations, methods compiled] before and after two profiles'
    else
      assert_nil after, 'no YJIT counts without YJIT'
    end
  end

  # make test-rubies' 4.0-box run: the targets, and the agent's evals, run with Ruby::Box on.
  def test_targets_run_in_a_box_as_the_suite_does
    t = target('work')
    out, err, status = tracer('-p', t.pid, '-e', 'defined?(Ruby::Box) ? Ruby::Box.enabled? : :none')
    assert status.success?, err
    expected = if defined?(Ruby::Box) then ENV['RUBY_BOX'] == '1' ? 'true' : 'false' else ':none' end
    assert_equal "=> #{expected}\n", out
  end
end
