# set_test.rb: Set is a core class written in C from Ruby 4.0 on, the set library's Ruby before
# it. Its methods are traced alike either way, with the arguments and values -m asks for, and
# the Set itself shows as that Ruby's #inspect does.
require_relative 'helper'
require 'set'

class SetTest < Minitest::Test
  include TracerTest

  SETS = File.join(ROOT, 'test', 'apps', 'sets.rb')

  def test_set_methods_are_traced_whatever_implements_them
    t = target('', script: SETS)
    source = t.out[/ready \d+ (\S+)/, 1]
    assert_equal Set.instance_method(:add).source_location ? 'set.rb' : 'C', source
    c = client('-p', t.pid, '-m', 'Set#add(size)', 'Set#include?', 'Object#tally')
    c.wait_for(/^Object#tally\n  Set#add\(size=\d\) <[\d.]+>\n  Set#include\? <[\d.]+>\nObject#tally <[\d.]+>\n/, stream: :out)
    c.signal('INT')
    assert c.finish.success?, c.err
    refute_match(/matched no method|not traced/, c.err)
    out, err, status = tracer('-p', t.pid, '-e', 'ObjectSpace.each_object(Set).first(1).map(&:inspect)')
    assert status.success?, err
    # 4.0's Set#inspect is Set[...]; the library's, #<Set: {...}>.
    assert_match(source == 'C' ? /\A=> \["Set\[[\d, ]+\]"\]\n\z/ : /\A=> \["#<Set: \{[\d, ]+\}>"\]\n\z/, out)
  end
end
