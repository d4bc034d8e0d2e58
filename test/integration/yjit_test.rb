# yjit_test.rb: targets run with YJIT exactly when the suite does (make test-rubies runs it with
# RUBY_YJIT_ENABLE=1 on a Ruby built with YJIT), and no mode turns YJIT off.
require_relative 'helper'

class YjitTest < Minitest::Test
  include TracerTest

  EXPECTED = ENV['RUBY_YJIT_ENABLE'] == '1'
  MODES = [%w[-m Worker#work(x)], %w[-m Hash#key?], %w[-f], %w[-s 1], %w[--top calls --json],
           %w[--top time --json], %w[--top objects --json], %w[-f --all --yes]].freeze

  def yjit?(t)
    out, err, status = tracer('-p', t.pid, '-e', '!!(defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?)')
    assert status.success?, err
    out == "=> true\n"
  end

  def test_targets_run_with_yjit_as_the_suite_does_and_every_mode_leaves_it_on
    t = target('work')
    assert_equal EXPECTED, yjit?(t), "RUBY_YJIT_ENABLE=#{ENV['RUBY_YJIT_ENABLE'].inspect}"
    MODES.each do |args|
      _, err, status = tracer('-p', t.pid, *args, '--duration', '0.3')
      assert status.success?, "#{args.join(' ')}: #{err}"
      assert_equal EXPECTED, yjit?(t), "YJIT after #{args.join(' ')}"
    end
  end
end
