# boxed.rb: what boxes.rb requires in a Ruby::Box of its own: a class of that box, and a
# method on a builtin class that only that box sees.
class Boxed
  def work(x) = x + 1
end

class String
  def shout = upcase
end
